"""What the Magnet family tells the rest of fabula about itself (``agent.pipelines.Pipeline``):
how a story file becomes a run's configuration, how a stored step's world is shown, and the
words its progress uses. Both ``runner`` (Magnet) and ``baseline`` (single) register with these."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.magnet.definition import load_definition
from agent.magnet.history import graph_json, graph_svg, render_text
from agent.store import RunStore

PROGRESS = {
    "character": "the characters act",
    "critic": "the critic reads",
    "narrator": "narrating",
    "narrator-select": "the narrator chooses",
    "goal": "choosing the next goal",
    "transition": "writing a transition",
    "recap": "recapping",
    "baseline": "writing",
}
"""What a model call of each Magnet role is doing, as a writer would say it."""
MODEL_ROLES = {
    "character": ("character",),
    "critic": ("critic",),
    "narrator": ("narrator", "narrator-select"),
    "goal": ("goal", "transition"),
}
"""The paper's roles, each of which may have its own model (``--role-model ROLE=MODEL``), with the
ledger roles of their calls: the narrator selects and writes, the goal generator also writes the
transition. The recap (fabula's long-range memory, not a role of the paper) asks the run's model."""


def story_config(
    path: Path, *, pages: float | None = None, words: int | None = None, page_words: int | None = None
) -> dict[str, Any]:
    """The configuration entries of a story definition file (its length overridden if given)."""
    story = load_definition(path).with_length(pages=pages, words=words, page_words=page_words)
    return {"story": story.to_dict()}


def graph(store: RunStore, unit: int | None) -> str:
    """The world graph at ``unit`` (the latest without it), as SVG."""
    return graph_svg(graph_json(store, unit))


def history(store: RunStore) -> list[str]:
    """Every world-state commit per timestep (``fabula show --history``)."""
    return render_text(store)
