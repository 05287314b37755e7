"""The writer's own inputs in a baseline's prompt (RollSum, Direct): the style guide and the story bible.

NstAgent carries them through its chapter prompt (the guide) and its narrative state (the bible);
the baselines have no state, so the bible goes into their prompt whole, as text. One place for both
baselines so they stay comparable with NstAgent.
"""

from __future__ import annotations

from typing import Any

from agent.bible.seed import planner_block
from agent.language import language_line
from agent.store import RunStore
from agent.style.guide import prompt_block


def voice_blocks(store: RunStore, item: dict[str, Any], prompt: str, config: Any) -> str:
    """The blocks a baseline's writer prompt adds for ``item`` (its chapter, or the whole story): the
    bible, the style card and exemplars, the language line; empty when the run has none."""
    parts = []
    bible = store.plans.get("bible")
    if bible:
        parts.append(f"# Story bible\n{planner_block(bible)}")
    guide = store.plans.get("style")
    if guide:
        parts.append(prompt_block(guide, item))
    language = language_line(prompt, config)
    if language:
        parts.append(language)
    return "\n\n".join(parts)


def describe_style(ctx: Any, budget: Any) -> None:
    """Add the model-written description to the run's style card, once (a failed call leaves the card
    measured only, and says so)."""
    guide = ctx.store.plans.get("style")
    if not guide or guide.get("description") is not None:
        return
    from agent.errors import FabulaError
    from agent.style.describe import describe

    try:
        with ctx.unit(0):
            text = describe(ctx.llm, budget, guide, temperature=ctx.config.temperature)
    except (FabulaError, ValueError) as exc:
        ctx.emit("note", f"the style card has no written description: {exc}")
        text = ""
    ctx.store.plans.put("style", {**guide, "description": text})
