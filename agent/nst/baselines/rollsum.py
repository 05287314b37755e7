"""The RollSum baseline: plain chapters from the same frozen outline, with a rolling summary.

Each chapter is one plain-text reply (no tools) conditioned on the prompt, the outline and a
story-so-far summary, under the same gate as NstAgent (with feedback, a bounded number of
attempts, the closest draft kept and marked degraded otherwise). After each accepted
chapter the model rewrites the summary from the previous summary and the new chapter. The
summary is method-internal state: it is stored with the chapter and never counts as story.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent import pipelines
from agent.gate import Gate
from agent.llm import LLM
from agent.llm.budget import Budget
from agent.llm.types import Message
from agent.nst.baselines import reference_prompts
from agent.nst.baselines.gated_chapter import GatedChapter, Settle, write_gated_chapter
from agent.nst.baselines.summary import SYSTEM, rederive_rollsum, summarize
from agent.nst.baselines.voice import describe_style, voice_blocks
from agent.nst.chapter.drafter import GateOutcome
from agent.nst.chapter.planned import PlannedChapter
from agent.nst.chapter.prompt import outline_block
from agent.nst.chapter.sizing import initial_ratio, run_budget
from agent.nst.config import RollSumConfig
from agent.nst.plan.frozen import PLANNING_WORDS, frozen_plan, stop_after_plan
from agent.run_context import EventSink, RunContext
from agent.settings import STORY_WORDS
from agent.store import RunStore
from agent.store.snapshots import ChapterSnapshot
from agent.store.writer.review import owed_review, pause_after
from agent.text import count_words


def chapter_messages(
    prompt: str,
    outline: Sequence[PlannedChapter],
    summary: str,
    item: PlannedChapter,
    gate: Gate,
    completed: int,
    *,
    reference: bool = False,
    voice: str = "",
) -> list[Message]:
    """The chapter request; ``voice``: the writer's bible, style and language blocks (``agent.nst.baselines.voice``);
    ``reference``: shaped as the reference's (``agent.nst.baselines.reference_prompts``)."""
    if reference:
        return reference_prompts.chapter_messages(prompt, outline, summary, item, gate, voice)
    user = (
        f"# Story prompt\n{prompt}\n\n# Outline ({len(outline)} chapters, frozen)\n{outline_block(outline)}\n\n"
        f"# Story so far (summary)\n{summary or '(nothing written yet)'}\n\n"
        f"# Progress\nCompleted chapters: {completed} of {len(outline)}.\n\n"
        + (f"{voice}\n\n" if voice else "")
        + f'# Current task\nWrite chapter {item.id}: "{item.title}".\nWhat happens: {item.description}\n'
        f"Length: {gate.describe()}.\nThe outline is a plan, not prose: expand it into scenes with dialogue, "
        "sensory detail and inner experience.\n"
        "Reply with the chapter's prose only: no title line, no notes."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


@dataclass
class RollingSummary:
    """The story-so-far summary; rewritten after each chapter's draft is kept, before it is committed."""

    ctx: RunContext[RollSumConfig]
    budget: Budget
    text: str

    def after(self, index: int, title: str, gate: Gate, *, last: bool = False) -> Settle:
        """Settle chapter ``index``: the new summary, and the chapter's state with it. After the ``last``
        chapter no summary is made: nothing reads it (the reference's rule, rolling_summary.py:958-971)."""

        def settle(outcome: GateOutcome, ratio: float) -> dict[str, Any]:
            if not last:
                self.text = summarize(self.ctx, self.budget, self.text, index, outcome.text, title)
            stats = {
                "attempts": outcome.attempts,
                "first_attempt_pass": outcome.first_attempt_pass,
                "words": outcome.words,
                "target": gate.target,
                "degraded": outcome.degraded,
                "summary_words": count_words(self.text),
            }
            return ChapterSnapshot(summary=self.text, tokens_per_word=ratio, chapter=stats).stored()

        return settle


def write(ctx: RunContext[RollSumConfig]) -> None:
    store, config = ctx.store, ctx.config
    budget = run_budget(ctx)
    plan = frozen_plan(ctx, budget)
    outline = plan.chapters
    store.set_target(len(outline))
    if stop_after_plan(ctx, outline):
        return
    describe_style(ctx, budget)
    last = store.info().last_unit
    if owed_review(store):  # stopped between the last commit and its review: the writer sees it first
        ctx.emit("note", f"chapter {last} committed; in review until fabula approve")
        return
    previous = ChapterSnapshot.read(store.state(last) if last else None)
    summary = RollingSummary(ctx, budget, previous.summary or "")
    ratio = previous.tokens_per_word or initial_ratio(config.prompt, config.tokens_per_word)
    ctx.set_progress(words=store.words_written(), units=len(outline), target_words=config.words)
    for index in range(store.next_unit(), len(outline) + 1):
        item = plan.chapter(index)
        gate = config.gate(item.target_words)
        messages = chapter_messages(
            config.prompt,
            outline,
            summary.text,
            item,
            gate,
            index - 1,
            reference=config.reference_prompts,
            voice=voice_blocks(store, item.as_json(), config.prompt, config),
        )

        chapter = GatedChapter(
            index,
            item.title,
            messages,
            gate,
            config.chapter_attempts,
            "rollsum_chapter",
            grow_after_cut=config.turn_token_overhead is not None,
        )
        settle = summary.after(index, item.title, gate, last=index == len(outline))
        _, ratio = write_gated_chapter(ctx, chapter, ratio=ratio, budget=budget, settle=settle)
        if pause_after(store, index):  # --review
            return
    store.finish()


def write_story(store: RunStore, llm: LLM, config: RollSumConfig, *, events: EventSink | None = None) -> None:
    """:func:`write` for a caller that holds an open model (tests, benchmarks)."""
    with RunContext(store, config, llm=llm, events=events) as ctx:
        write(ctx)


PIPELINE = pipelines.register(
    pipelines.Pipeline(
        "rollsum",
        "chapter",
        write,
        version="1",
        settings=RollSumConfig,
        rederive=rederive_rollsum,
        planned=True,
        help="baseline: chapters from the same outline with a rolling story-so-far summary",
        progress={**PLANNING_WORDS, "rollsum_summary": "summing up the story so far", "rollsum_chapter": "drafting"},
        words=STORY_WORDS,
    )
)
