"""One gated chapter of a baseline, the skeleton RollSum and Direct share: draft until the length gate
passes (or the attempts run out and the closest draft is kept, marked degraded), settle the state the
chapter is stored with, commit, report.

One path for both, so a change to how a baseline keeps, records or commits a chapter reaches both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.gate import Gate
from agent.llm.budget import Budget
from agent.llm.types import Message
from agent.nst.chapter.drafter import Drafter, GateOutcome, draft_until_gate, record_attempt
from agent.nst.chapter.restarts import degraded_reason, with_restarts
from agent.run_context import RunContext

Settle = Callable[[GateOutcome, float], dict[str, Any]]
"""The state stored with the chapter, from the kept draft and the drafter's tokens-per-word ratio; it
may call the model (RollSum's summary), and its calls are filed under the chapter."""


@dataclass(frozen=True)
class GatedChapter:
    """What one baseline chapter is asked for: its number, title, request, gate and attempts."""

    index: int
    title: str
    messages: list[Message]
    gate: Gate
    attempts: int
    role: str
    """The ledger role of each draft call (``rollsum_chapter``, ``direct_story``)."""
    grow_after_cut: bool = False
    """The reference's RollSum: a draft cut at its budget short of the range's top grows the next budget."""


def write_gated_chapter(
    ctx: RunContext[Any], chapter: GatedChapter, *, ratio: float, budget: Budget, settle: Settle
) -> tuple[GateOutcome, float]:
    """Draft, settle and commit ``chapter`` as one unit; the kept draft and the updated ratio."""
    with ctx.unit(chapter.index):
        tries: list[Drafter] = []

        def draft() -> GateOutcome:
            """One try at the chapter, by a fresh drafter: from the checkpoint (``chapter_restarts``)."""
            drafter = Drafter.for_config(ctx.llm, chapter.gate, ratio, ctx.config, chapter.role, budget=budget)
            if chapter.grow_after_cut:
                drafter.grow_to = ctx.config.prose_max_tokens or ctx.config.prose_max_tokens_cap
            tries.append(drafter)
            return draft_until_gate(drafter, chapter.messages, chapter.attempts, on_attempt=record_attempt(ctx))

        outcome = with_restarts(ctx, chapter.index, ctx.config.chapter_restarts, draft, degraded_reason)
        drafter = tries[-1]
        state = settle(outcome, drafter.ratio)
        ctx.store.commit_chapter(
            chapter.index,
            chapter.title,
            outcome.text,
            state=state,
            degraded=outcome.degraded,
            degraded_reason=outcome.reason,
        )
        ctx.set_progress(words=ctx.words + outcome.words)
        ctx.emit("committed", words=outcome.words, degraded=outcome.degraded)
    return outcome, drafter.ratio
