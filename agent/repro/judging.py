"""Judging a grid's stories and reading them back as table rows.

Every completed story of every cell is judged with the protocols of the grid's tables
(NstAgent: extended ConStory-Bench consistency with the terminal window chosen by target
length, and WritingBench-style quality against criteria cached once per prompt in the grid's
folder, so every method and length is scored against the same rubric; Magnet: the editorial
annotations and rubric). Judgments are stored in each run and a rerun asks only what is
missing (``agent.eval.judge.run_calls``). Every judge request is fitted to the judge's context;
a story whose prompt cannot fit is refused in one line before anything is sent, and left
unscored (never counted as zero errors).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent import pipelines
from agent.eval.collect import run_row
from agent.eval.consistency import judge_consistency
from agent.eval.editorial import judge_editorial
from agent.eval.judge import Judge, JudgeContextError
from agent.eval.quality import judge_quality
from agent.eval.story import load_story
from agent.repro.cells import PlannedCell
from agent.repro.grid import Grid
from agent.store import RunStore
from agent.store.paths import DB_NAME
from agent.store.snapshots import ChapterSnapshot

TOOLS = ("read", "search", "write", "correct", "update")
"""NstAgent's tools as Table 8 counts them (every call, rejected attempts included)."""


@dataclass
class JudgeCounts:
    ok: int = 0
    failed: int = 0
    skipped: int = 0
    refused: list[str] = field(default_factory=list)

    def add(self, counts: dict[str, int]) -> None:
        self.ok += counts["ok"]
        self.failed += counts["failed"]
        self.skipped += counts["skipped"]


def story_runs(planned: PlannedCell) -> list[Path]:
    """The cell's story runs that exist on disk, in the batch's order."""
    return [planned.folder / s.run_dir for s in planned.stories if (planned.folder / s.run_dir / DB_NAME).is_file()]


def judge_cells(grid: Grid, planned: list[PlannedCell], judge: Judge, criteria: Path) -> JudgeCounts:
    """Judge every completed story with the grid's protocols (only what is missing is asked)."""
    counts = JudgeCounts()
    for cell in planned:
        for run_dir in story_runs(cell):
            with RunStore.open(run_dir) as store:
                if store.info().status != "completed":
                    continue
                story = load_story(store)
                try:
                    for protocol in grid.evals:
                        counts.add(_judge_one(protocol, store, story, judge, criteria))
                except JudgeContextError as exc:
                    counts.refused.append(f"{run_dir}: {exc}")
    return counts


def _judge_one(protocol: str, store: RunStore, story: Any, judge: Judge, criteria: Path) -> dict[str, int]:
    if protocol == "consistency":
        return judge_consistency(store, story, judge)[1]
    if protocol == "quality":
        return judge_quality(store, story, judge, criteria)
    return judge_editorial(store, story, [judge])


def tool_usage(store: RunStore) -> dict[str, Any]:
    """Table 8's figures for one NstAgent run: tool calls per story and the final state's size."""
    calls = store.ledger.tool_calls()
    out: dict[str, Any] = {f"tool_{t}": sum(1 for c in calls if c.tool == t) for t in TOOLS}
    out["chapters"] = len(store.chapters())
    narrative = ChapterSnapshot.read(store.state()).state()
    out["state_characters"] = len(narrative.characters) if narrative else None
    out["state_past_events"] = len(narrative.past_events) if narrative else None
    out["state_open_requirements"] = len(narrative.future_requirements) if narrative else None
    return out


def rows(grid: Grid, planned: list[PlannedCell]) -> list[dict[str, Any]]:
    """One row per story run: the evaluation's row (``agent.eval.collect``) labelled with its cell.

    Runs pair by prompt, length and seed (the seed joins the prompt key), as the paper pairs the
    two methods' stories of one prompt."""
    out = []
    for cell in planned:
        for run_dir in story_runs(cell):
            with RunStore.open(run_dir, readonly=True) as store:
                row = run_row(store)
                row["backend"] = store.info().backend
                if pipelines.get(store.info().pipeline).tools:  # a tool loop's run (NstAgent), not a baseline's
                    row.update(tool_usage(store))
            row.update(
                method=cell.cell.method.name,
                seed=cell.cell.seed,
                target_words=cell.cell.words,
                prompt_key=f"{row['prompt_key']}|seed={cell.cell.seed}",
            )
            out.append(row)
    return out
