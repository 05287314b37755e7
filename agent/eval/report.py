"""``fabula eval report RUNS... --out DIR``: a Markdown report recomputed from the store.

Every number comes from stored chapters, states, ledgers and judgments (no model is called),
so a report can be regenerated at any time and always agrees with what is stored. PNG plots
(see ``agent.eval.plots``): CED and writing quality against length, generation tokens
against length, and state size per chapter. Without matplotlib the tables are still written
and the report says how to get the plots.

Only runs that may be published are in the tables (``agent.eval.eligibility``); the report
says how many were left out and why, and marks the ones ``--include-incomplete`` let in.
Copies made by ``fabula eval inject`` get their own section: the length x depth recall table
of NstAgent's Table 9, and Kendall's tau between detection and target length, and between
detection and the words separating the two halves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.eval.inject import DEPTHS
from agent.eval.plots import MISSING, plots_available, png_plot
from agent.eval.stats import kendall_tau_b, mean_sem
from agent.store.paths import write_atomic

TABLE = (
    ("method", "method", None),
    ("words", "words", "{:.0f}"),
    ("target", "target_words", "{}"),
    ("gate", "gate_compliance", "{:.0%}"),
    ("degraded", "degraded_chapters", "{}"),
    ("subtype CED", "subtype_ced", "{:.2f}"),
    ("instance CED", "instance_ced", "{:.2f}"),
    ("local / global", None, None),
    ("verified CED (dropped)", None, None),
    ("WQ", "writing_quality", "{:.2f}"),
    ("annotations", "annotations", "{:.1f}"),
    ("rubric", "rubric", "{:.1f}"),
    ("distinct-2", "distinct_2", "{:.3f}"),
    ("rep. 4-gram", "repeated_4gram_rate", "{:.3f}"),
    ("req. open/resolved", None, None),
    ("tokens / 1K words", "total_tokens_per_1k_words", "{:.0f}"),
    ("cached", "cached_share", "{:.0%}"),
)
SUMMARY = (
    "subtype_ced",
    "instance_ced",
    "local_instance_ced",
    "global_instance_ced",
    "verified_instance_ced",
    "writing_quality",
    "annotations",
    "rubric",
    "gate_compliance",
    "distinct_2",
    "repeated_4gram_rate",
    "total_tokens_per_1k_words",
    "cached_share",
)


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


def _name(row: dict[str, Any]) -> str:
    return Path(row["run"]).name + (" †" if row.get("marked") else "")


def _hits(rows: list[dict[str, Any]], key: str) -> str:
    return f"{sum(bool(r['injection'][key]) for r in rows)}/{len(rows)}"


def injection_section(rows: list[dict[str, Any]]) -> list[str]:
    """NstAgent Table 9 from injected copies: recall per target length and per length x depth,
    false positives on controls, and Kendall's tau of detection against length and distance."""
    judged = [r for r in rows if r["injection"].get("judge") is not None]
    planted = [r for r in judged if not r["injection"]["control"]]
    controls = [r for r in judged if r["injection"]["control"]]
    lengths = sorted({r["target_words"] or 0 for r in judged})
    lines = [
        "## Injected contradictions (judge recall)",
        "",
        f"{len(planted)} planted contradiction(s) and {len(controls)} control(s) judged; "
        f"{len(rows) - len(judged)} copy(ies) without a complete judgment left out.",
        "",
        "| target length | words between the halves | target subtype | target category | any subtype | "
        "controls reported as target category |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for length in lengths:
        cell = [r for r in planted if (r["target_words"] or 0) == length]
        ctrl = [r for r in controls if (r["target_words"] or 0) == length]
        dist = [r["injection"]["distance_words"] for r in cell]
        span = f"{min(dist)}-{max(dist)}" if dist else "-"
        lines.append(
            f"| {length or '-'} | {span} | {_hits(cell, 'subtype_hit') if cell else '-'} | "
            f"{_hits(cell, 'category_hit') if cell else '-'} | {_hits(cell, 'any_hit') if cell else '-'} | "
            f"{_hits(ctrl, 'category_hit') if ctrl else '-'} |"
        )
    depths = [d for d in DEPTHS if any(r["injection"]["depth"] == d for r in planted)]
    lines += [
        "",
        "Target category recall by length and depth:",
        "",
        "| target length | " + " | ".join(depths) + " |",
        "| --- |" + " --- |" * len(depths),
    ]
    for length in lengths:
        cells = []
        for depth in depths:
            cell = [r for r in planted if (r["target_words"] or 0) == length and r["injection"]["depth"] == depth]
            cells.append(_hits(cell, "category_hit") if cell else "-")
        lines.append(f"| {length or '-'} | " + " | ".join(cells) + " |")
    detected = [float(r["injection"]["category_hit"]) for r in planted]
    lines.append("")
    for what, xs in (
        ("target length", [float(r["target_words"] or 0) for r in planted]),
        ("words between the halves", [float(r["injection"]["distance_words"]) for r in planted]),
    ):
        tau, p = kendall_tau_b(xs, detected) if len(planted) >= 2 else (None, None)
        lines.append(
            f"- Kendall's tau-b, detection (target category) against {what}: "
            + (f"tau = {tau:+.2f}, p = {p:.2g}" if tau is not None else "undefined (no variation)")
        )
    return lines


def render(
    rows: list[dict[str, Any]],
    plots: list[str],
    *,
    selection: list[str] | None = None,
    injected: list[dict[str, Any]] | None = None,
) -> str:
    lines = [
        "# fabula evaluation report",
        "",
        f"{len(rows)} run(s). Every number is recomputed from the run stores (chapters, states, ledgers and "
        "stored judgments); no model was called to write this report. CED is errors per 10K checked words "
        "of the terminal window; '-' means not scored (no judgment, or a failed one, which is never counted "
        "as zero errors). Verified CED keeps only instances whose quotes occur in the story.",
        "",
        *([""] + [f"- {line.strip()}" for line in selection] + [""] if selection else []),
        "## Runs",
        "",
        "| run | " + " | ".join(t[0] for t in TABLE) + " |",
        "| --- |" + " --- |" * len(TABLE),
    ]
    for row in rows:
        lines.append(f"| {_name(row)} | " + " | ".join(_cell(row, *t) for t in TABLE) + " |")
    lines += [
        "",
        "## Means by method and target length",
        "",
        "| method | target | n | " + " | ".join(SUMMARY) + " |",
        "| --- | --- | --- |" + " --- |" * len(SUMMARY),
    ]
    groups: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["method"], row["target_words"]), []).append(row)
    for (method, target), group in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0)):
        cells = []
        for key in SUMMARY:
            m, se = mean_sem([r[key] for r in group if r.get(key) is not None])
            cells.append("-" if m is None else f"{m:.3f}" + (f" ± {se:.3f}" if se is not None else ""))
        mixed = any(
            len({(r.get("judge_setups") or {}).get(f) for r in group} - {None}) > 1
            for f in ("consistency", "quality", "criteria", "editorial")
        )
        label = f"{method} (mixed judges)" if mixed else method
        lines.append(f"| {label} | {target or '-'} | {len(group)} | " + " | ".join(cells) + " |")
    if any(r.get("marked") for r in rows):
        lines += [
            "",
            "† incomplete, outside the length gate or not fully judged; included by --include-incomplete "
            "and not publishable.",
        ]
    judges = sorted({str(spec) for r in rows for spec in (r.get("judge_specs") or {}).values()})
    if judges:
        lines += ["", "Judge setups and criteria recorded in these runs:"] + [f"- {j}" for j in judges]
    if injected:
        lines += ["", *injection_section(injected)]
    failed = [(Path(r["run"]).name, r["failed_judgments"]) for r in rows if r.get("failed_judgments")]
    if failed:
        lines += [
            "",
            "Failed judgments (excluded; rerun the eval command to retry them): "
            + ", ".join(f"{name} {n}" for name, n in failed),
        ]
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


def write_report(
    rows: list[dict[str, Any]],
    out_dir: Path,
    *,
    selection: list[str] | None = None,
    injected: list[dict[str, Any]] | None = None,
) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    plots: list[str] = []
    state = {Path(r["run"]).name: [(s["unit"], s["bytes"]) for s in r.get("state_sizes", [])] for r in rows}
    specs = [
        ("ced_vs_length.png", _by_method(rows, "instance_ced"), "Instance CED against length", "errors / 10K"),
        ("subtype_ced_vs_length.png", _by_method(rows, "subtype_ced"), "Subtype CED against length", "subtypes / 10K"),
        (
            "quality_vs_length.png",
            _by_method(rows, "writing_quality"),
            "Writing quality against length",
            "score (1-10)",
        ),
        (
            "cost_vs_length.png",
            _by_method(rows, "total_tokens_per_1k_words"),
            "Generation tokens per 1K words",
            "tokens / 1K words",
        ),
        ("state_size.png", state, "State size per chapter", "bytes"),
    ]
    if plots_available():
        for name, series, title, ylabel in specs:
            per_chapter = name == "state_size.png"
            png = png_plot(
                series,
                title=title,
                xlabel="chapter (unit)" if per_chapter else "story words",
                ylabel=ylabel,
                lines=per_chapter,
            )
            if png:
                write_atomic(out_dir / name, png)
                plots.append(name)
    path = out_dir / "report.md"
    write_atomic(path, render(rows, plots, selection=selection, injected=injected).encode("utf-8"))
    slim = [{k: v for k, v in r.items() if k != "state_sizes"} for r in rows]
    write_atomic(out_dir / "metrics.json", json.dumps(slim, indent=2, ensure_ascii=False, default=str).encode())
    return path
