"""The Direct baseline: the whole story in one call, accepted only within ±20% of the total.

No plan, memory or tools; a bounded number of attempts, each with the previous attempt's
length feedback, and the closest attempt kept (marked degraded) if none passes. The story is
committed as one chapter so that ``show``, ``export`` and evaluation read it like any run.
"""

from __future__ import annotations

from typing import Any

from agent import pipelines
from agent.llm import LLM
from agent.llm.types import Message
from agent.nst.baselines import reference_prompts
from agent.nst.baselines.gated_chapter import GatedChapter, write_gated_chapter
from agent.nst.baselines.voice import describe_style, voice_blocks
from agent.nst.chapter.drafter import GateOutcome
from agent.nst.chapter.sizing import initial_ratio, run_budget
from agent.nst.config import DirectConfig
from agent.run_context import EventSink, RunContext
from agent.settings import STORY_WORDS
from agent.store import RunStore
from agent.store.snapshots import ChapterSnapshot

SYSTEM = "You are a novelist. Write in the language of the prompt."


def _stored_state(outcome: GateOutcome, ratio: float) -> dict[str, Any]:
    """Direct's state: the attempts and words, also at the top level where older readers look."""
    chapter = {"attempts": outcome.attempts, "words": outcome.words, "first_attempt_pass": outcome.first_attempt_pass}
    return {"attempts": outcome.attempts, "words": outcome.words, **ChapterSnapshot(chapter=chapter).stored()}


def write(ctx: RunContext[DirectConfig]) -> None:
    store, config = ctx.store, ctx.config
    store.set_target(1)
    if store.next_unit() > 1:
        store.finish()
        return
    gate = config.gate(config.words)
    budget = run_budget(ctx)
    describe_style(ctx, budget)
    ctx.set_progress(words=0, units=1, target_words=config.words)
    voice = voice_blocks(store, {"title": "", "description": config.prompt}, config.prompt, config)
    base: list[Message] = (
        reference_prompts.direct_messages(config.prompt, gate, voice)
        if config.reference_prompts
        else [
            {"role": "system", "content": SYSTEM},
            {
                "role": "user",
                "content": f"# Story prompt\n{config.prompt}\n\n"
                + (f"{voice}\n\n" if voice else "")
                + "Write the complete "
                f"story in one reply. Length: {gate.describe()}. Reply with the story only.",
            },
        ]
    )
    chapter = GatedChapter(1, "Story", base, gate, config.attempts, "direct_story")
    ratio = initial_ratio(config.prompt, config.tokens_per_word)
    write_gated_chapter(ctx, chapter, ratio=ratio, budget=budget, settle=_stored_state)
    store.finish()


def write_story(store: RunStore, llm: LLM, config: DirectConfig, *, events: EventSink | None = None) -> None:
    """:func:`write` for a caller that holds an open model (tests, benchmarks)."""
    with RunContext(store, config, llm=llm, events=events) as ctx:
        write(ctx)


PIPELINE = pipelines.register(
    pipelines.Pipeline(
        "direct",
        "chapter",
        write,
        version="1",
        settings=DirectConfig,
        help="baseline: the whole story in one call",
        progress={"direct_story": "writing the story"},
        words=STORY_WORDS,
    )
)
