"""Re-deriving the state stored with an edited chapter (``fabula edit --chapter N``).

A chapter's stored state is what the model derived from its text; once the writer edits the
text, that state describes a chapter that no longer exists. Each method re-derives it the way
its chapter loop derived it, with one model call, from the state before the chapter and the
edited text:

NstAgent: one ``update`` call through the chapter loop's update path; RollSum: one summary call
(``agent.nst.baselines.summary.rederive_rollsum``); Direct and ``--no-state``: nothing to do.
Only chapter N is re-derived; later chapters are marked stale (``agent.store.writer.edit``). A
failed call leaves the edit committed and the old state marked stale; editing again retries.
Per method, and why later chapters are not re-derived: docs/design/rederive.md.
"""

from __future__ import annotations

import time
from typing import Any

from agent.llm import LLMError
from agent.nst.chapter.loop import ChapterLoop
from agent.nst.chapter.planned import Plan
from agent.nst.chapter.sizing import initial_ratio, run_budget
from agent.nst.chapter.update import ASK_AFTER_EDIT
from agent.nst.config import NstConfig
from agent.nst.state import NarrativeState
from agent.pipelines import Rederived
from agent.run_context import RunContext
from agent.store import StoreError
from agent.store.snapshots import ChapterSnapshot


def edited_snapshots(ctx: RunContext[Any], index: int) -> tuple[ChapterSnapshot, ChapterSnapshot]:
    """The snapshots after chapter ``index - 1`` (before chapter 1: a sequel's initial state, else
    empty) and after ``index``."""
    before = ChapterSnapshot.read(ctx.store.state(index - 1))
    return before, ChapterSnapshot.read(ctx.store.state(index))


def store_rederived(
    ctx: RunContext[Any], index: int, current: ChapterSnapshot, mark: dict[str, Any] | None = None, **changed: Any
) -> None:
    """Replace chapter ``index``'s stored state by ``current`` with ``changed``, recording the re-derivation."""
    chapter = ctx.store.chapter(index)
    version = chapter.version if chapter is not None else None
    stored = {
        **current.stored(),
        **changed,
        "rederived": {"version": version, "at": time.time(), "calls": 1, **(mark or {})},
    }
    ctx.store.replace_state(index, ChapterSnapshot.read(stored).stored())


def not_rederived(index: int, what: str, error: str, calls: int) -> Rederived:
    """The result of a failed re-derivation: the edit kept, the old state left in place and marked stale."""
    first = (error.splitlines() or ["failed"])[0]
    first = first if len(first) <= 200 else first[:197] + "..."
    return Rederived(
        index,
        False,
        f"the state after chapter {index} was not re-derived: {what} failed ({first}); "
        "the edit is kept and the old state stays, marked stale",
        calls,
    )


def rederive_nst(
    ctx: RunContext[NstConfig], index: int, *, mark: dict[str, Any] | None = None, ask: str = ASK_AFTER_EDIT
) -> Rederived:
    """Chapter ``index``'s narrative state from its edited text, by one update call. ``mark``: kept
    in the state's ``rederived`` record in the same write (``fabula reconcile`` knows a chapter done
    by it); ``ask``: what the update call is asked after the text (a later chapter, not edited,
    is asked as the text it is)."""
    store, config = ctx.store, ctx.config
    chapter = store.chapter(index)
    if chapter is None:
        raise StoreError(f"chapter {index} does not exist")
    before, current = edited_snapshots(ctx, index)
    if not config.state or current.narrative is None:
        return Rederived(index, True, "this run keeps no narrative state (--no-state): nothing to re-derive")
    plan = Plan.of(store.plans.all())
    start = ctx.calls
    try:
        budget = run_budget(ctx)
        loop = ChapterLoop(
            ctx.llm,
            store,
            plan=plan,
            story_prompt=config.prompt,
            state=NarrativeState.from_json(before.narrative),
            index=index,
            config=config,
            ratio=current.tokens_per_word or initial_ratio(config.prompt, config.tokens_per_word),
            emit=ctx.emit,
            budget=budget,
        )
        ok = loop.update_from_text(chapter.title, chapter.text, ask=ask)
    except LLMError as exc:
        return not_rederived(index, "the update call", str(exc), ctx.calls - start)
    if not ok or loop.new_state is None:
        return not_rederived(index, "the update call", loop.last_error or "not applied", ctx.calls - start)
    store_rederived(ctx, index, current, mark, narrative=loop.new_state.to_json())
    applied = loop.last_update
    refused = len(applied.refused) if applied is not None else 0
    return Rederived(
        index,
        True,
        f"the state after chapter {index} was re-derived from the edited text (one update "
        f"call: {applied.applied if applied is not None else 0} entries applied"
        + (f", {refused} refused for evidence not in the text" if refused else "")
        + ")",
        ctx.calls - start,
    )
