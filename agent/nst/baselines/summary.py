"""RollSum's story-so-far summary: the prompt, the call that rewrites it after a chapter, and the
re-derivation of an edited chapter's summary (:func:`rederive_rollsum`).

Its own module so that writing a chapter (``rollsum``) and re-deriving the summary of an edited
chapter share it.
"""

from __future__ import annotations

from agent.llm import LLMError
from agent.llm.budget import Budget
from agent.llm.types import Message
from agent.nst.baselines import reference_prompts
from agent.nst.chapter.rederive import edited_snapshots, not_rederived, store_rederived
from agent.nst.chapter.sizing import run_budget
from agent.nst.config import RollSumConfig
from agent.pipelines import Rederived
from agent.run_context import RunContext
from agent.store import StoreError

SYSTEM = "You are a novelist writing a long story one chapter at a time. Write in the language of the prompt."


def summary_messages(summary: str, index: int, text: str) -> list[Message]:
    user = (
        f"Summary of the story so far:\n{summary or '(empty: this is the first chapter)'}\n\n"
        f"New chapter {index}:\n{text}\n\nRewrite the summary of the story so far so that it also covers the "
        "new chapter. Keep every fact a later chapter may need: names, ages, dates, places, what each "
        "character knows and has, promises not yet kept. Reply with the summary only."
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def summarize(
    ctx: RunContext[RollSumConfig], budget: Budget, summary: str, index: int, text: str, title: str = ""
) -> str:
    """The summary after chapter ``index`` (also how ``fabula edit`` re-derives it from an edited chapter)."""
    config = ctx.config
    messages = (
        reference_prompts.summary_messages(config.prompt, summary, index, title, text)
        if config.reference_prompts
        else summary_messages(summary, index, text)
    )
    reply = budget.generate(
        ctx.llm,
        messages,
        temperature=config.temperature,
        max_tokens=config.summary_max_tokens,
        min_output=min(config.summary_max_tokens, 512),
        role="rollsum_summary",
        what=f"the summary after chapter {index}",
    )
    return reply.text.strip()


def rederive_rollsum(ctx: RunContext[RollSumConfig], index: int) -> Rederived:
    """Chapter ``index``'s story-so-far summary from the previous one and the edited text."""
    chapter = ctx.store.chapter(index)
    if chapter is None:
        raise StoreError(f"chapter {index} does not exist")
    before, current = edited_snapshots(ctx, index)
    start = ctx.calls
    try:
        summary = summarize(ctx, run_budget(ctx), before.summary or "", index, chapter.text, chapter.title)
    except LLMError as exc:
        return not_rederived(index, "the summary call", str(exc), ctx.calls - start)
    store_rederived(ctx, index, current, summary=summary)
    return Rederived(
        index,
        True,
        f"the summary after chapter {index} was re-derived from the edited text (one summary call)",
        ctx.calls - start,
    )
