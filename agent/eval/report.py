"""``fabula eval report RUNS... --out DIR``: a Markdown report recomputed from the store.

Every number comes from stored chapters, states, ledgers and judgments (no model is called),
so a report can be regenerated at any time and always agrees with what is stored. PNG plots
(see ``agent.eval.plots``): CED and writing quality against length, generation tokens
against length, and state size per chapter. Without matplotlib the tables are still written
and the report says how to get the plots.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.eval.plots import MISSING, plots_available, png_plot
from agent.eval.stats import mean_sem
from agent.store.paths import write_atomic

TABLE = (("method", "method", None), ("words", "words", "{:.0f}"), ("target", "target_words", "{}"),
         ("gate", "gate_compliance", "{:.0%}"), ("degraded", "degraded_chapters", "{}"),
         ("subtype CED", "subtype_ced", "{:.2f}"), ("instance CED", "instance_ced", "{:.2f}"),
         ("local / global", None, None), ("verified CED (dropped)", None, None),
         ("WQ", "writing_quality", "{:.2f}"), ("annotations", "annotations", "{:.1f}"),
         ("rubric", "rubric", "{:.1f}"), ("distinct-2", "distinct_2", "{:.3f}"),
         ("rep. 4-gram", "repeated_4gram_rate", "{:.3f}"), ("req. open/resolved", None, None),
         ("tokens / 1K words", "total_tokens_per_1k_words", "{:.0f}"), ("cached", "cached_share", "{:.0%}"))
SUMMARY = ("subtype_ced", "instance_ced", "local_instance_ced", "global_instance_ced", "verified_instance_ced",
           "writing_quality", "annotations", "rubric", "gate_compliance", "distinct_2", "repeated_4gram_rate",
           "total_tokens_per_1k_words", "cached_share")


def _cell(row: dict[str, Any], label: str, key: str | None, fmt: str | None) -> str:
    if label == "local / global":
        a, b = row.get("local_instance_ced"), row.get("global_instance_ced")
        return f"{a:.2f} / {b:.2f}" if a is not None and b is not None else "-"
    if label == "verified CED (dropped)":
        v = row.get("verified_instance_ced")
        return f"{v:.2f} ({row.get('dropped_unverified', 0):.0f})" if v is not None else "-"
    if label == "req. open/resolved":
        o, r = row.get("requirements_opened"), row.get("requirements_resolved")
        return f"{o}/{r}" if o is not None else "-"
    value = row.get(key or "")
    if value is None:
        return "-"
    return fmt.format(value) if fmt else str(value)


def render(rows: list[dict[str, Any]], plots: list[str]) -> str:
    lines = ["# fabula evaluation report", "",
             f"{len(rows)} run(s). Every number is recomputed from the run stores (chapters, states, ledgers and "
             "stored judgments); no model was called to write this report. CED is errors per 10K checked words "
             "of the terminal window; '-' means not scored (no judgment, or a failed one, which is never counted "
             "as zero errors). Verified CED keeps only instances whose quotes occur in the story.", "",
             "## Runs", "", "| run | " + " | ".join(t[0] for t in TABLE) + " |",
             "| --- |" + " --- |" * len(TABLE)]
    for row in rows:
        lines.append(f"| {Path(row['run']).name} | " + " | ".join(_cell(row, *t) for t in TABLE) + " |")
    lines += ["", "## Means by method and target length", "", "| method | target | n | " + " | ".join(SUMMARY) + " |",
              "| --- | --- | --- |" + " --- |" * len(SUMMARY)]
    groups: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["method"], row["target_words"]), []).append(row)
    for (method, target), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        cells = []
        for key in SUMMARY:
            m, se = mean_sem([r[key] for r in group if r.get(key) is not None])
            cells.append("-" if m is None else f"{m:.3f}" + (f" ± {se:.3f}" if se is not None else ""))
        lines.append(f"| {method} | {target or '-'} | {len(group)} | " + " | ".join(cells) + " |")
    failed = [(Path(r["run"]).name, r["failed_judgments"]) for r in rows if r.get("failed_judgments")]
    if failed:
        lines += ["", "Failed judgments (excluded; rerun the eval command to retry them): "
                  + ", ".join(f"{name} {n}" for name, n in failed)]
    if plots:
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in plots]
    elif not plots_available():
        lines += ["", "## Plots", "", f"No plots: {MISSING}."]
    return "\n".join(lines) + "\n"


def _by_method(rows: list[dict[str, Any]], key: str, x: str = "words") -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = {}
    for row in rows:
        if row.get(key) is not None and row.get(x):
            out.setdefault(row["method"], []).append((float(row[x]), float(row[key])))
    return out


def write_report(rows: list[dict[str, Any]], out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    plots: list[str] = []
    state = {Path(r["run"]).name: [(s["unit"], s["bytes"]) for s in r.get("state_sizes", [])] for r in rows}
    specs = [("ced_vs_length.png", _by_method(rows, "instance_ced"), "Instance CED against length", "errors / 10K"),
             ("subtype_ced_vs_length.png", _by_method(rows, "subtype_ced"), "Subtype CED against length",
              "subtypes / 10K"),
             ("quality_vs_length.png", _by_method(rows, "writing_quality"), "Writing quality against length",
              "score (1-10)"),
             ("cost_vs_length.png", _by_method(rows, "total_tokens_per_1k_words"), "Generation tokens per 1K words",
              "tokens / 1K words"),
             ("state_size.png", state, "State size per chapter", "bytes")]
    if plots_available():
        for name, series, title, ylabel in specs:
            per_chapter = name == "state_size.png"
            png = png_plot(series, title=title, xlabel="chapter (unit)" if per_chapter else "story words",
                           ylabel=ylabel, lines=per_chapter)
            if png:
                write_atomic(out_dir / name, png)
                plots.append(name)
    path = out_dir / "report.md"
    write_atomic(path, render(rows, plots).encode("utf-8"))
    slim = [{k: v for k, v in r.items() if k != "state_sizes"} for r in rows]
    write_atomic(out_dir / "metrics.json", json.dumps(slim, indent=2, ensure_ascii=False, default=str).encode())
    return path


