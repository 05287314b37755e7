"""Long-range memory for a Magnet step: BM25 recall of earlier paragraphs and a running recap.

Beyond the recent window (``history_window`` paragraphs), **recall** searches the run's FTS5
paragraph index for at most ``recall_paragraphs`` earlier paragraphs (``recall_words`` each), and
every ``recap_every`` steps one bounded call (``recap_tokens``) rewrites the running **recap**; a
failed recap keeps the previous one and is recorded. Both give way first when a prompt does not
fit the context (recalled passages, then the recap). Details: docs/design/magnet-memory.md.
"""

from __future__ import annotations

from typing import Any

from agent.llm import LLM, LLMError
from agent.llm.budget import Budget
from agent.magnet import prompts
from agent.magnet.definition import StoryDefinition
from agent.magnet.prompts import Memory
from agent.magnet.settings import MagnetSettings
from agent.magnet.world import WorldGraph
from agent.store import RunStore

RECAP_SOURCE_PARAGRAPHS = 24
"""At most this many of the newest paragraphs feed one recap call (a bound on its prompt)."""


def recall_query(story: StoryDefinition, world: WorldGraph | None) -> str:
    """The acting characters and where they are now."""
    parts = []
    for name in story.names:
        parts.append(name)
        if world is not None and world.location(name):
            parts.append(str(world.location(name)))
    return " ".join(parts)


def _cut(text: str, words: int) -> str:
    split = text.split()
    return text if len(split) <= words else " ".join(split[:words]) + " ..."


def recall(
    store: RunStore, story: StoryDefinition, settings: MagnetSettings, world: WorldGraph | None, before_step: int
) -> list[str]:
    """Earlier paragraphs (before ``before_step``) relevant to the cast and places, in story order."""
    if settings.recall_paragraphs <= 0 or before_step <= 1:
        return []
    hits = store.search_paragraphs(recall_query(story, world), k=settings.recall_paragraphs, before_step=before_step)
    return [_cut(p.text, settings.recall_words) for p in sorted(hits, key=lambda p: (p.step, p.seq))]


def refresh_recap(
    llm: LLM,
    store: RunStore,
    story: StoryDefinition,
    settings: MagnetSettings,
    state: dict[str, Any],
    step: int,
    budget: Budget | None = None,
) -> dict[str, Any] | None:
    """Rewrite ``state["recap"]`` if it is due before ``step``; returns a failure to record, if any."""
    every = settings.recap_every
    if every <= 0 or step <= 1 or (step - 1) % every != 0 or state.get("recap_step", 0) >= step - 1:
        return None
    since = [p.text for p in store.paragraphs() if p.step > state.get("recap_step", 0)][-RECAP_SOURCE_PARAGRAPHS:]
    if not since:
        return None
    from agent.magnet.prose import write_prose

    def build() -> list:
        return prompts.recap(story, state.get("recap", ""), since)

    def trim() -> str | None:
        if len(since) <= 1:
            return None
        del since[0]
        return "trim_recap_source"

    try:
        max_tokens = settings.ceiling(settings.recap_tokens)
        if budget is not None:
            max_tokens = budget.fit(
                build,
                max_tokens=max_tokens,
                min_output=min(max_tokens, 96),
                shrink=trim,
                what=f"the recap before step {step}",
            )
        text, _ = write_prose(
            llm,
            build(),
            settings,
            temperature=settings.recap_temperature,
            max_tokens=max_tokens,
            min_tokens=None,
            role="recap",
            budget=budget,
        )
    except LLMError as exc:
        return {
            "role": "recap",
            "character": None,
            "error": (str(exc).splitlines() or ["failed"])[0],
            "outcome": "kept the previous recap",
        }
    state["recap"], state["recap_step"] = text, step - 1
    return None


def prepare(
    llm: LLM,
    store: RunStore,
    story: StoryDefinition,
    settings: MagnetSettings,
    state: dict[str, Any],
    step: int,
    budget: Budget | None = None,
) -> tuple[Memory, dict[str, Any]]:
    """The memory step ``step`` sees, and the state with its recap refreshed if due."""
    state = {**state}
    failure = refresh_recap(llm, store, story, settings, state, step, budget)
    world = WorldGraph.from_json(state["world"]) if state.get("world") is not None else None
    window_start = _window_start(store, settings)
    recalled = recall(store, story, settings, world, window_start)
    return Memory(recap=state.get("recap", ""), recalled=recalled, failures=[failure] if failure else []), state


def _window_start(store: RunStore, settings: MagnetSettings) -> int:
    """The first step of the recent window: recall looks only before it (no repeats)."""
    recent = store.paragraphs()[-settings.history_window :]
    return recent[0].step if recent else 1
