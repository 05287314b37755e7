"""The grid's cells as batches on disk: planned, created or grown, and written through ``fabula batch``.

Each cell (a method at a length and a seed) is an ordinary batch folder, ``OUT/<method>/<words>/
seed-<n>``, so ``fabula batch show`` and ``batch resume`` work on it and every story is a run.
Every cell is planned before anything is created (a bad prompt set, id or setting is one
line). A cell that exists is grown, never redone: stories it lacks (a grid that now takes more
prompts) are added pending, finished ones are skipped by the batch itself, and interrupted ones
continue from their last committed unit. A cell's settings are recorded beside its batch
(``cell.json``); a rerun whose method, profile, length or role models differ for that folder is
refused. A cell whose pipeline has roles may be written with a model of its own per role (``llms``,
by cell folder: the grid's roles, the flags and the config file, resolved by the command); its batch
and every run of it record them, so a rerun and ``fabula resume`` go on with the same.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.batch import BatchResult, BatchStore, StorySpec, create, is_batch, plan_stories, run
from agent.batch.tracker import Sink
from agent.llm.options import LLMOptions
from agent.repro.grid import Cell, Grid, GridError
from agent.store.paths import write_atomic

if TYPE_CHECKING:
    from agent.llm import LLM

MARKER = "cell.json"


@dataclass(frozen=True)
class PlannedCell:
    cell: Cell
    folder: Path
    stories: list[StorySpec]
    exists: bool


def plan_cell(grid: Grid, cell: Cell) -> list[StorySpec]:
    """The stories of one cell, each with its validated configuration."""
    method = cell.method
    if grid.prompts is not None:
        specs = plan_stories(
            method.pipeline,
            prompts=grid.prompts,
            ids=grid.ids,
            words=cell.words,
            settings=method.settings,
            profile=grid.profile,
        )
        count = grid.stories_at(cell.words)
        return specs[:count] if count else specs
    return plan_stories(
        method.pipeline, stories=grid.stories, words=cell.words, settings=method.settings, profile=grid.profile
    )


def plan(grid: Grid, out: Path) -> list[PlannedCell]:
    """Every cell planned and checked against what ``out`` holds; nothing is created."""
    planned = []
    for cell in grid.cells():
        folder = out / cell.folder
        exists = is_batch(folder)
        if exists:
            marker = folder / MARKER
            recorded = json.loads(marker.read_text(encoding="utf-8")) if marker.is_file() else {}
            if recorded.get("digest") != grid.cell_digest(cell):
                raise GridError(
                    f"{folder} was written with other settings for {cell.method.name} (pipeline, set, "
                    "profile or length); give the method another name or use another --out"
                )
        elif folder.exists() and any(folder.iterdir()):
            raise GridError(f"{folder} exists and is not a batch of this grid; use another --out")
        planned.append(PlannedCell(cell, folder, plan_cell(grid, cell), exists))
    return planned


def prepare(
    grid: Grid, planned: list[PlannedCell], llm: LLMOptions, llms: Mapping[str, LLMOptions] | None = None
) -> list[str]:
    """Create the new cells (each with its model: ``llms``' by cell folder, else ``llm``) and grow the
    existing ones; returns one line per change."""
    lines = []
    for p in planned:
        if p.exists:
            with BatchStore.open(p.folder) as batch:
                added = batch.add_stories(p.stories)
            if added:
                lines.append(
                    f"{p.cell.folder}: {len(added)} new stor{'y' if len(added) == 1 else 'ies'} "
                    f"({', '.join(added[:5])}{', ...' if len(added) > 5 else ''})"
                )
            continue
        chosen = (llms or {}).get(p.cell.folder, llm)
        create(p.folder, p.cell.method.pipeline, p.stories, chosen, concurrency=grid.concurrency).close()
        spec: dict[str, object] = {
            "digest": grid.cell_digest(p.cell),
            "method": p.cell.method.name,
            "pipeline": p.cell.method.pipeline,
            "settings": p.cell.method.settings,
            "profile": grid.profile,
            "words": p.cell.words,
            "seed": p.cell.seed,
        }
        roles = grid.roles_of(p.cell.method).models
        if roles:
            spec["roles"] = dict(roles)
        write_atomic(p.folder / MARKER, json.dumps(spec, indent=2).encode("utf-8"))
        lines.append(f"{p.cell.folder}: new, {len(p.stories)} stor{'y' if len(p.stories) == 1 else 'ies'}")
    return lines


def write(
    planned: list[PlannedCell],
    *,
    llm: LLMOptions | None,
    model: LLM | None = None,
    sink: Sink | None = None,
    stop: threading.Event | None = None,
    llms: Mapping[str, LLMOptions] | None = None,
) -> list[BatchResult]:
    """Write every cell through the batch runner (finished stories are skipped by it). A cell of
    ``llms`` (by folder) is written with its own model, never the shared ``model``: its roles' models
    are opened with it (by the batch, once per cell)."""
    results = []
    for p in planned:
        with BatchStore.open(p.folder, readonly=True) as batch:
            if all(r.status == "completed" for r in batch.stories()):
                continue
        own = (llms or {}).get(p.cell.folder)
        chosen, shared = (llm, model) if own is None else (own, None)
        results.append(run(p.folder, llm=chosen, model=shared, sink=sink, stop=stop))
    return results
