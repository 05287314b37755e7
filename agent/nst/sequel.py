"""``fabula sequel RUN --out RUN2 --words N``: a new book that starts where a finished one ended.

Book two is a run of its own (NstAgent), planned and written as any run from its prompt, except
that (1) its initial state, the state its chapter 1 is written from, is book one's final state:
every character with its facts, every past event, the open future requirements (all kept, but those
the writer names resolved: ``--resolve KEY``); (2) its prompt tells the planner which book it
follows and what was left open; (3) its plan names the series (``agent.store.series``): the
writer's search covers book one, read-only, and the export names the series.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent import pipelines
from agent.errors import InputError
from agent.nst.config import NST_DEFAULTS
from agent.nst.continuing import WRITER, finished_book
from agent.nst.state import NarrativeState
from agent.store import RunStore
from agent.store.export import story_title
from agent.store.series import sequel_record

NAMED = 20
"""Characters and open threads named in the sequel's prompt at most (the state holds them all)."""


@dataclass(frozen=True)
class Sequel:
    """What book two starts from."""

    config: dict[str, Any]
    """Its settings (before the model's are added)."""
    initial_state: dict[str, Any]
    series: dict[str, Any]


def carried_state(state: NarrativeState, resolve: list[str]) -> NarrativeState:
    """Book one's final state with the requirements ``resolve`` names closed (``InputError`` for a
    key that is not open)."""
    unknown = [key for key in resolve if key not in state.future_requirements]
    if unknown:
        listed = ", ".join(sorted(state.future_requirements)[:12]) or "none"
        raise InputError(f"--resolve {unknown[0]}: book one has no such open requirement (open: {listed})")
    data = state.to_json()
    data["future_requirements"] = {k: v for k, v in state.future_requirements.items() if k not in resolve}
    return NarrativeState.from_json(data)


def sequel_prompt(prompt: str | None, title: str, state: NarrativeState, series: dict[str, Any]) -> str:
    """Book two's story prompt: the writer's, and which book it follows with what was left open."""
    given = " ".join(prompt.split()) if prompt else f"The story of \"{title}\" goes on."
    names = list(state.characters)[:NAMED]
    threads = [f"{text}" for text in list(state.future_requirements.values())[:NAMED]]
    told = (f"\n\nThis is book {series['index']} of the series \"{series['name']}\"; it follows \"{title}\", "
            "and its characters and their facts carry over.")
    if names:
        told += f" Characters at the end of \"{title}\": {', '.join(names)}."
    if threads:
        told += " Left open there: " + " ".join(t if t.endswith(".") else t + "." for t in threads)
    return given + told


def plan_sequel(first: RunStore, *, prompt: str | None, words: int, resolve: list[str]) -> Sequel:
    """Book two's configuration, initial state and series record (nothing is written)."""
    if prompt is not None and not prompt.strip():
        raise InputError("--prompt is empty")
    found = finished_book(first, command="fabula sequel")
    pipelines.get(WRITER).check_words(words)
    state = carried_state(found.state, resolve)
    title = story_title(first)
    series = sequel_record(first, title)
    info = first.info()
    base = dict(NST_DEFAULTS) if found.imported else {k: v for k, v in info.config.items()
                                                      if k not in ("pipeline_version", "llm", "prompt_id")}
    base.update(prompt=sequel_prompt(prompt, title, state, series), words=words, prompt_id=None)
    return Sequel(base, {"narrative": state.to_json()}, series)
