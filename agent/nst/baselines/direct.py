"""The Direct baseline: the whole story in one call, accepted only within ±20% of the total.

No plan, memory or tools; a bounded number of attempts, each with the previous attempt's
length feedback, and the closest attempt kept (marked degraded) if none passes. The story is
committed as one chapter so that ``show``, ``export`` and evaluation read it like any run.
"""

from __future__ import annotations

from agent import pipelines
from agent.llm import LLM
from agent.llm.types import Message
from agent.nst.baselines.voice import describe_style, voice_blocks
from agent.nst.chapter.drafter import Drafter, draft_until_gate, record_attempt
from agent.nst.chapter.sizing import initial_ratio, run_budget
from agent.nst.config import DirectConfig
from agent.run_context import EventSink, RunContext
from agent.settings import STORY_WORDS
from agent.store import RunStore
from agent.store.snapshots import ChapterSnapshot

SYSTEM = "You are a novelist. Write in the language of the prompt."


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
    base: list[Message] = [
        {"role": "system", "content": SYSTEM},
        {
            "role": "user",
            "content": f"# Story prompt\n{config.prompt}\n\n"
            + (f"{voice}\n\n" if voice else "")
            + "Write the complete "
            f"story in one reply. Length: {gate.describe()}. Reply with the story only.",
        },
    ]
    with ctx.unit(1):
        drafter = Drafter.for_config(
            ctx.llm, gate, initial_ratio(config.prompt, config.tokens_per_word), config, "direct_story", budget=budget
        )
        outcome = draft_until_gate(drafter, base, config.attempts, on_attempt=record_attempt(ctx))
        snapshot = ChapterSnapshot(
            chapter={
                "attempts": outcome.attempts,
                "words": outcome.words,
                "first_attempt_pass": outcome.first_attempt_pass,
            }
        )
        store.commit_chapter(
            1,
            "Story",
            outcome.text,
            state={"attempts": outcome.attempts, "words": outcome.words, **snapshot.stored()},
            degraded=outcome.degraded,
            degraded_reason=outcome.reason,
        )
        ctx.set_progress(words=outcome.words)
        ctx.emit("committed", words=outcome.words, degraded=outcome.degraded)
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
