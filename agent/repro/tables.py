"""The papers' tables from a grid's rows, in the papers' rows and columns (Markdown).

NstAgent: Table 3 (subtype and instance CED, writing quality and average words per method and
target length, with the paired tests of Appendix C.4: paired t-test, bootstrap CI and Holm
from ``agent.eval.compare``), Table 8 (NstAgent's tool calls per story and per chapter, and its
final state's size) and Table 4 (calls, input, cached input and output tokens per story).
Magnet: Table 1 (editorial annotations) and Table 2 (rubric), mean ± standard deviation per
method and length, with the paired t-tests against Magnet. Only publishable runs are scored
(``agent.eval.eligibility``) unless the grid includes the others, marked †.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from statistics import fmean, stdev
from typing import Any

from agent.eval.compare import MixedJudgesError, compare
from agent.eval.compare import render as render_comparisons
from agent.repro.grid import MAGNET_TABLES, NSTAGENT_TABLES, Grid
from agent.repro.judging import TOOLS

Row = dict[str, Any]
TINY_NOTE = (
    "**These stories were written on the embedded 135M model: the numbers below only show that the grid "
    "runs end to end and fills the papers' tables. They are meaningless as results.**"
)


def length_label(words: int, tables: str) -> str:
    if tables == MAGNET_TABLES and words % 500 == 0:
        return f"{words // 500} page{'s' if words > 500 else ''}"
    return f"{words // 1000}K" if words % 1000 == 0 else str(words)


def _mean(rows: Sequence[Row], key: str, fmt: str = "{:.3f}") -> str:
    values = [float(r[key]) for r in rows if r.get(key) is not None]
    return fmt.format(fmean(values)) if values else "-"


def _mean_sd(rows: Sequence[Row], key: str) -> str:
    values = [float(r[key]) for r in rows if r.get(key) is not None]
    if not values:
        return "-"
    return f"{fmean(values):.1f} ± {stdev(values):.2f}" if len(values) > 1 else f"{values[0]:.1f}"


def _cells(grid: Grid, rows: Sequence[Row]) -> list[tuple[str, int, list[Row]]]:
    return [
        (m.name, w, [r for r in rows if r["method"] == m.name and r["target_words"] == w])
        for m in grid.methods
        for w in grid.lengths
    ]


def _table(header: Sequence[str], body: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    return lines + ["| " + " | ".join(cells) + " |" for cells in body]


def tiny(row: Row) -> bool:
    """A run written by the embedded default model (SmolLM2-135M: the run records no model name)."""
    return row.get("backend") == "embedded" and not row.get("model")


def _model(rows: Sequence[Row]) -> str:
    models = sorted({"SmolLM2-135M (embedded)" if tiny(r) else str(r.get("model") or "?") for r in rows})
    return ", ".join(models) or "-"


def nst_table3(grid: Grid, rows: Sequence[Row]) -> list[str]:
    body = [
        [
            _model(group),
            method,
            length_label(words, grid.tables),
            _mean(group, "subtype_ced"),
            _mean(group, "instance_ced"),
            _mean(group, "writing_quality"),
            _mean(group, "words", "{:,.0f}"),
            str(sum(1 for r in group if r.get("instance_ced") is not None)),
        ]
        for method, words, group in _cells(grid, rows)
    ]
    return [
        "## Table 3: results by target length",
        "",
        *_table(
            [
                "Model",
                "Method",
                "Target Length",
                "Subtype CED (↓)",
                "Instance CED (↓)",
                "Writing Quality (↑)",
                "Avg. Words",
                "n scored",
            ],
            body,
        ),
    ]


def nst_table8(grid: Grid, rows: Sequence[Row]) -> list[str]:
    body = []
    for method, words, group in _cells(grid, rows):
        group = [r for r in group if "tool_write" in r]  # the tool loop's runs (see judging.rows)
        if not group:
            continue
        chapters = sum(r.get("chapters") or 0 for r in group)
        per_chapter = (
            (
                f"{sum(r['tool_write'] for r in group) / chapters:.2f} / "
                f"{sum(sum(r[f'tool_{t}'] for t in TOOLS) for r in group) / chapters:.2f}"
            )
            if chapters
            else "-"
        )
        body.append(
            [
                _model(group),
                method,
                length_label(words, grid.tables),
                *[_mean(group, f"tool_{t}", "{:.1f}") for t in TOOLS],
                per_chapter,
                _mean(group, "state_characters", "{:.1f}"),
                _mean(group, "state_past_events", "{:.1f}"),
                _mean(group, "state_open_requirements", "{:.1f}"),
            ]
        )
    header = [
        "Model",
        "Method",
        "Length",
        "read",
        "search",
        "write",
        "correct",
        "update",
        "write / all tools per chapter",
        "Characters",
        "Past events",
        "Open req.",
    ]
    table = _table(header, body) if body else ["(no NstAgent runs in this grid)"]
    return ["## Table 8: NstAgent tool calls per story (rejected attempts included) and final state size", "", *table]


def nst_table4(grid: Grid, rows: Sequence[Row]) -> list[str]:
    def k(key: str) -> Callable[[Sequence[Row]], str]:
        return lambda group: (
            _mean(group, key, "{:,.1f}")
            if key == "llm_calls"
            else (lambda v: "-" if v == "-" else f"{float(v) / 1000:,.1f}K")(_mean(group, key, "{}"))
        )

    body = [
        [
            method,
            length_label(words, grid.tables),
            k("llm_calls")(group),
            k("prompt_tokens")(group),
            k("cached_prompt_tokens")(group),
            k("completion_tokens")(group),
        ]
        for method, words, group in _cells(grid, rows)
    ]
    return [
        "## Table 4: average generation cost per story (from the usage of every call)",
        "",
        *_table(["Method", "Length", "Calls", "Input Tokens", "Cached Input", "Output Tokens"], body),
    ]


def magnet_table(grid: Grid, rows: Sequence[Row], key: str, number: int, title: str, arrow: str) -> list[str]:
    body = [
        [
            m.name,
            *[
                _mean_sd([r for r in rows if r["method"] == m.name and r["target_words"] == w], key)
                for w in grid.lengths
            ],
        ]
        for m in grid.methods
    ]
    header = ["Method", *[f"{length_label(w, grid.tables)} {arrow}" for w in grid.lengths]]
    return [f"## Table {number}: {title} (mean ± standard deviation)", "", *_table(header, body)]


def paired(grid: Grid, rows: Sequence[Row], metrics: tuple[str, ...]) -> list[str]:
    """The first method against each other one, paired by prompt, length and seed."""
    first, *others = grid.methods
    if not others:
        return []
    a = [r for r in rows if r["method"] == first.name]
    baselines = [[r for r in rows if r["method"] == m.name] for m in others]
    try:
        comparisons, notes = compare(a, baselines, metrics=metrics, labels=[m.name for m in others])
    except MixedJudgesError as exc:
        return [
            "## Paired tests",
            "",
            "Not computed: runs judged by different judge setups are not paired:",
            *[f"- {line}" for line in exc.lines],
        ]
    return [
        f"## Paired tests: {first.name} (A) against each other method (B)",
        "",
        *render_comparisons(comparisons, notes),
    ]


def render(grid: Grid, rows: Sequence[Row], selection: Sequence[str], *, notes: Sequence[str] = ()) -> str:
    lines = [
        f"# fabula repro {grid.name}",
        "",
        grid.description,
        "",
        f"Grid: {grid.source}; profile {grid.profile}; lengths {', '.join(map(str, grid.lengths))} words; "
        f"seeds {', '.join(map(str, grid.seeds))}; methods {', '.join(m.name for m in grid.methods)}.",
        "",
    ]
    if any(tiny(r) for r in rows):
        lines += [TINY_NOTE, ""]
    lines += [f"- {line.strip()}" for line in selection] + [f"- {n}" for n in notes] + [""]
    if grid.tables == NSTAGENT_TABLES:
        sections = [
            nst_table3(grid, rows),
            paired(grid, rows, ("subtype_ced", "instance_ced", "writing_quality")),
            nst_table8(grid, rows),
            nst_table4(grid, rows),
        ]
    else:
        sections = [
            magnet_table(grid, rows, "annotations", 1, "editorial annotation counts", "↓"),
            magnet_table(grid, rows, "rubric", 2, "rubric-based scores", "↑"),
            paired(grid, rows, ("annotations", "rubric")),
        ]
    for section in sections:
        if section:
            lines += [*section, ""]
    if any(r.get("marked") for r in rows):
        lines.append(
            "† The grid includes runs that are incomplete, outside the length gate or not fully judged "
            "(include_incomplete = true): not publishable."
        )
    return "\n".join(lines).rstrip() + "\n"
