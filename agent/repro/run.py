"""``fabula repro GRID``: write the grid through the batches, judge it, and report the papers' tables.

The steps, each resumable: plan every cell (nothing created on bad input), create or grow the
cells' batches, write them (``agent.batch``: finished stories are never redone, interrupted ones
continue from their last committed unit), judge every completed story (only missing judgments
are asked), then recompute the report from the stores alone (``OUT/report.md``, and every row in
``OUT/rows.json``). A rerun after Ctrl-C, a kill or a lost server picks up where it stopped; a
grid that grows (more prompts, lengths, methods or seeds) writes only what is new.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent.batch.tracker import Sink
from agent.eval.eligibility import select
from agent.eval.judge import Judge
from agent.llm.options import LLMOptions
from agent.repro import cells, judging, tables
from agent.repro.grid import Grid
from agent.store.paths import write_atomic

if TYPE_CHECKING:
    from agent.llm import LLM


@dataclass
class ReproResult:
    report: Path
    text: str
    stories: int
    completed: int
    judged: judging.JudgeCounts | None
    lines: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        judged_ok = self.judged is None or (not self.judged.failed and not self.judged.refused)
        return self.completed == self.stories and judged_ok


def run_grid(
    grid: Grid,
    out: Path,
    *,
    llm: LLMOptions,
    judge: Judge | None,
    model: LLM | None = None,
    sink: Sink | None = None,
    stop: threading.Event | None = None,
    planned: list[cells.PlannedCell] | None = None,
    llms: Mapping[str, LLMOptions] | None = None,
) -> ReproResult:
    """Write, judge and report the grid in ``out`` (``judge`` None: write and report only). ``llms``:
    the model of each cell whose roles have models of their own, by cell folder (else ``llm``)."""
    planned = planned if planned is not None else cells.plan(grid, out)
    lines = cells.prepare(grid, planned, llm, llms)
    cells.write(planned, llm=llm, model=model, sink=sink, stop=stop, llms=llms)
    counts = None
    if judge is not None:
        counts = judging.judge_cells(grid, planned, judge, out / "criteria")
        lines.append(
            f"judgments: {counts.ok} made, {counts.failed} failed, {counts.skipped} already stored"
            + (
                f", {len(counts.refused)} stor{'y' if len(counts.refused) == 1 else 'ies'} refused"
                if counts.refused
                else ""
            )
        )
        lines += counts.refused
    return report(grid, out, planned, lines=lines, judged=counts)


def report(
    grid: Grid,
    out: Path,
    planned: list[cells.PlannedCell],
    *,
    lines: list[str] | None = None,
    judged: judging.JudgeCounts | None = None,
) -> ReproResult:
    """The report from what the stores hold (no model is called)."""
    rows = judging.rows(grid, planned)
    stories = sum(len(p.stories) for p in planned)
    completed = sum(1 for r in rows if r["status"] == "completed")
    kept, selection = select(rows, include_incomplete=grid.include_incomplete)
    notes = [f"{completed} of {stories} stories completed"]
    text = tables.render(grid, kept, selection, notes=notes)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "report.md"
    write_atomic(path, text.encode("utf-8"))
    slim = [{k: v for k, v in r.items() if k != "state_sizes"} for r in rows]
    write_atomic(out / "rows.json", json.dumps(slim, indent=2, ensure_ascii=False, default=str).encode("utf-8"))
    return ReproResult(path, text, stories, completed, judged, list(lines or []))


def judge_from(spec: Any, llm: LLM, label: str, endpoint: str | None) -> Judge:
    """The grid's judge around an open model."""
    return Judge(
        llm,
        label,
        temperature=spec.temperature,
        max_tokens=spec.max_tokens,
        seed=spec.seed,
        endpoint=endpoint or "embedded",
        context_tokens=spec.context_tokens,
        min_output=spec.min_output,
    )
