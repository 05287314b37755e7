"""``fabula repro GRID --estimate``: what a grid will cost, before anything runs.

One story per method and length is written by the real pipeline (the grid's profile and
settings, the real length) against :class:`~agent.repro.simulated.SimulatedModel`, in a
temporary folder; its calls and prompt and completion tokens are multiplied by the cell's
stories. Hours are completion tokens over a tokens/s figure (given, or measured on the server
with one request): generation is bound by decoding, and prompt processing, mostly of cached
prefixes, is left out. The simulated model passes every gate at the first try, so the counts are
a floor; judging is not included.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent import pipelines
from agent.errors import InputError
from agent.llm.options import LLMOptions
from agent.repro.cells import plan_cell
from agent.repro.grid import Cell, Grid
from agent.repro.simulated import SimulatedModel

if TYPE_CHECKING:
    from agent.llm import LLM

SIM_CONTEXT = 32_768
"""The context the simulated model states (a 14B model's native one): requests are fitted to it."""
MEASURE_TOKENS = 256


@dataclass(frozen=True)
class CellEstimate:
    method: str
    words: int
    seeds: int
    stories: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    """Per story, from the simulated run."""

    def hours(self, tokens_per_s: float) -> float:
        return self.stories * self.seeds * self.completion_tokens / tokens_per_s / 3600


def story_count(grid: Grid, cell: Cell) -> int:
    """The cell's stories: planned from the prompt set, or the grid's count when the set is absent."""
    try:
        return len(plan_cell(grid, cell))
    except InputError:
        count = grid.stories_at(cell.words)
        if count is None or grid.prompts is None or grid.prompts.exists():
            raise
        return count


def _config(grid: Grid, cell: Cell, folder: Path) -> dict[str, Any]:
    registered = pipelines.get(cell.method.pipeline)
    settings = dict(registered.settings.profile_settings(grid.profile)) if registered.settings else {}
    settings.update(cell.method.settings)
    if registered.settings is not None and "plan_cache" in registered.settings.known():
        settings["plan_cache"] = str(folder / "plans")  # the user's plan cache is never touched
    if registered.takes == "prompt":
        return {
            **settings,
            "prompt": "A lighthouse keeper finds a letter from the future.",
            "prompt_id": "sim",
            "words": cell.words,
        }
    assert grid.stories is not None, "a grid of story pipelines names its stories folder (load_grid checks it)"
    assert registered.story_config is not None, f"{registered.name} takes a story file but cannot read one"
    first = sorted(Path(grid.stories).glob("*.toml"))[0]
    return {**settings, **registered.story_config(first, words=cell.words)}


def simulate(grid: Grid, cell: Cell) -> tuple[int, int, int]:
    """Calls, prompt tokens and completion tokens of one story of the cell, simulated."""
    with tempfile.TemporaryDirectory(prefix="fabula-estimate-") as tmp:
        folder = Path(tmp)
        model = SimulatedModel(context=SIM_CONTEXT)
        store = pipelines.start(
            folder / "run", cell.method.pipeline, _config(grid, cell, folder), LLMOptions("embedded"), model=model
        )
        with store:
            row = store.query(
                "SELECT count(*), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) FROM llm_calls"
            )[0]
    return int(row[0]), int(row[1]), int(row[2])


def estimate(grid: Grid) -> list[CellEstimate]:
    """Every (method, length) of the grid; seeds multiply the stories."""
    out = []
    for method in grid.methods:
        for words in grid.lengths:
            cell = Cell(method, words, grid.seeds[0])
            calls, prompt, completion = simulate(grid, cell)
            out.append(
                CellEstimate(method.name, words, len(grid.seeds), story_count(grid, cell), calls, prompt, completion)
            )
    return out


def measure_tokens_per_s(llm: LLM) -> float:
    """Completion tokens per second of one plain request on the server (after one warm-up)."""
    messages = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]
    llm.generate(messages, max_tokens=16, temperature=0.7)
    started = time.monotonic()
    reply = llm.generate(messages, max_tokens=MEASURE_TOKENS, temperature=0.7)
    elapsed = time.monotonic() - started
    return max(1, reply.usage.completion_tokens) / max(elapsed, 1e-6)


def render(grid: Grid, cells: list[CellEstimate], tokens_per_s: float, source: str) -> list[str]:
    lines = [
        f"fabula repro {grid.name} --estimate: {tokens_per_s:g} completion tokens/s ({source}); one simulated "
        f"story per method and length, profile {grid.profile}, a {SIM_CONTEXT}-token context",
        f"{'method':16} {'length':>7} {'stories':>8} {'calls':>10} {'prompt tok':>14} {'completion tok':>15} "
        f"{'hours':>8}",
    ]
    total = [0, 0, 0, 0.0]
    for c in cells:
        n = c.stories * c.seeds
        hours = c.hours(tokens_per_s)
        total = [
            total[0] + n * c.calls,
            total[1] + n * c.prompt_tokens,
            total[2] + n * c.completion_tokens,
            total[3] + hours,
        ]
        lines.append(
            f"{c.method[:16]:16} {c.words:>7} {n:>8} {n * c.calls:>10,} {n * c.prompt_tokens:>14,} "
            f"{n * c.completion_tokens:>15,} {hours:>8.1f}"
        )
    lines.append(f"{'total':16} {'':>7} {'':>8} {total[0]:>10,} {total[1]:>14,} {total[2]:>15,} {total[3]:>8.1f}")
    lines.append(
        "Per story: "
        + "; ".join(
            f"{c.method} {c.words}: {c.calls} calls, {c.prompt_tokens:,} prompt and "
            f"{c.completion_tokens:,} completion tokens"
            for c in cells
        )
    )
    lines.append(
        "Hours are completion tokens / tokens per second (decoding; prompt processing of mostly cached "
        "prefixes not counted). The simulated model passes every gate at the first try and never reads or "
        "searches, so these are a floor; judging is not included."
    )
    return lines
