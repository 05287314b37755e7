"""A chapter's state transition: applying an ``update`` call to the narrative state, per entry.

Entries whose evidence is not in the accepted chapter are refused and named, the rest applies;
after a refusal one more update may fix the refused entries. The chapter loop calls
:func:`update_state` for the ``update`` tool and for its fallback updates.
"""

from __future__ import annotations

from agent.nst.chapter.tools import ChapterSession, ToolError
from agent.nst.state import Applied, NarrativeState, UpdateError, describe_update
from grammars.nst import UpdateCall

CAP_REACHED = "The turn limit is reached. The chapter above is kept."
ONE_EVENT = "Record only the one most important event of this chapter, as a single past event."
ASK_AFTER_CAP = f"{CAP_REACHED} Call update now with what it changed."
ASK_ONE_EVENT = f"That update could not be applied. {ONE_EVENT}"
ASK_EVENT_AFTER_CAP = f"{CAP_REACHED} {ONE_EVENT}"
ASK_AFTER_EDIT = (
    "The writer has edited this chapter by hand: the text above is the chapter as it now stands and "
    "is kept. Call update now with what it changed."
)
ASK_FROM_BOOK = (
    "This chapter is the book's own text, as the author wrote it: the text above is the chapter and is "
    "kept. Call update now with what it establishes."
)


def update_state(
    s: ChapterSession, base: NarrativeState, call: UpdateCall, *, evidence: bool, atomic: bool = False
) -> tuple[Applied, str]:
    """Apply ``call`` to ``base`` for chapter ``s.index`` (evidence checked against the accepted
    text when ``evidence``); the session notes it. Returns what applied and the message for the
    model; raises :class:`ToolError` when nothing could be applied. ``atomic``: all or nothing,
    no second update (paper Eq. 6, "applies them atomically"): any refused entry refuses the call."""
    text = s.accepted_text if evidence else None
    retry = s.retry_update
    try:
        applied = base.apply(call, chapter=s.index, text=text)
        if atomic and applied.refused:
            raise UpdateError("; ".join(applied.refused))
    except UpdateError as exc:
        if retry:  # the one retry of refused entries is spent; the entries applied before stay
            s.retry_update = False
            raise ToolError(
                f"update rejected, nothing more was applied: {exc}. The state keeps what the "
                "first update applied; finish the chapter."
            ) from exc
        raise ToolError(
            f"update rejected, nothing was applied: {exc}. Call update again with the problems fixed."
        ) from exc
    s.updated = True
    s.retry_update = bool(applied.refused) and not retry and not atomic
    s.open_requirements = tuple(applied.state.future_requirements)
    counts = applied.state.counts()
    message = (
        f"State updated: {describe_update(call)}; {applied.applied} entries applied. The state now "
        f"holds {counts['characters']} characters, {counts['past_events']} past events, "
        f"{counts['open_requirements']} open requirements."
    )
    if applied.notes:
        message += " Note: " + "; ".join(applied.notes) + "."
    if applied.refused:
        message += (
            f" REFUSED {len(applied.refused)} entr{'y' if len(applied.refused) == 1 else 'ies'}: "
            + "; ".join(applied.refused)
            + "."
            + (" You may call update once more with only the refused entries, fixed." if s.retry_update else "")
        )
    return applied, message
