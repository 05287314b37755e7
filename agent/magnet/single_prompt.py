"""The single-model baseline as the paper's one prompt (``single_prompt``, the ``paper`` profile).

Magnet §4.2: "a standard prompting approach where [one model] generates a story without explicit
character agents, a critic module, a structured state, or goal sequencing", given the same story
definition. One call writes the whole story; its ``max_tokens`` is ``single_max_tokens`` fitted
to the context. fabula's default continues paragraph by paragraph instead (``agent.magnet.baseline``):
a local model rarely writes 10,000 words in one reply.
"""

from __future__ import annotations

import time
from typing import Any

from agent.llm.budget import run_budget
from agent.llm.types import Message
from agent.magnet import prompts
from agent.magnet.definition import StoryDefinition
from agent.run_context import RunContext
from agent.text import count_words

MIN_STORY_OUTPUT = 256
"""Less room than this for the reply and the story is not asked for (the budget refuses)."""


def messages(story: StoryDefinition) -> list[Message]:
    """The story definition and its length, and the request for the whole story."""
    system = (
        "You are a novelist. Write the complete story described below, beginning to end, in vivid, "
        f"concrete prose. {prompts.voice(story)} No headings."
    )
    user = "\n\n".join(
        [
            prompts.story_block(story),
            prompts.personas_block(story),
            f"Write the whole story, about {story.target_words} words long.",
        ]
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def write_whole(ctx: RunContext[Any], story: StoryDefinition, settings: Any, max_tokens: int) -> None:
    """One call, one step: the story's paragraphs committed together; a cut reply is recorded."""
    store = ctx.store
    budget = run_budget(ctx, settings.context_tokens, settings.context_reserve)
    started = time.perf_counter()
    with ctx.unit(1):
        reply = budget.generate(
            ctx.llm,
            messages(story),
            temperature=settings.baseline_temperature,
            max_tokens=max_tokens,
            min_output=MIN_STORY_OUTPUT,
            role="baseline",
            what="the whole story",
        )
        paragraphs = [" ".join(p.split()) for p in reply.text.split("\n\n") if p.strip()] or [reply.text.strip()]
        words = sum(count_words(p) for p in paragraphs)
        state = {"words": words, "narrations": 1, "narration_words": words, "finished": True}
        record = {
            "step": 1,
            "single_prompt": True,
            "cut_at_max_tokens": reply.finish_reason == "length",
            "words_total": words,
            "wall_s": round(time.perf_counter() - started, 3),
        }
        store.commit_step(1, paragraphs, state=state, record=record)
    ctx.set_progress(words=words)
    ctx.emit("committed", words=words, step=1, wall_s=record["wall_s"])
