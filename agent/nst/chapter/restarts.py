"""A failed chapter restarted from its checkpoint, as the NstAgent reference's ``--auto-resumes`` does.

Under ``chapter_restarts`` a chapter that would be kept degraded (no draft in the gate, the state not
updated, the turn cap reached) is written again from the state before it, up to that many times; then the
run fails, resumable, with nothing of the chapter committed. The paper's tables count only chapters that
passed the gate, so the ``paper`` profile never keeps an out-of-gate chapter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from agent.errors import FabulaError
from agent.run_context import RunContext

T = TypeVar("T")

RESTART_TOOL = "restart"
"""The ledger row of a chapter try that failed (its reason in ``error``; ``arguments``: try and restarts)."""


class Kept(Protocol):
    """What a try at a chapter keeps: whether it is degraded, and why."""

    @property
    def degraded(self) -> bool: ...

    @property
    def reason(self) -> str | None: ...


def degraded_reason(outcome: Kept) -> str | None:
    """Why a try failed (a degraded outcome), or None when it passed: the ``failure`` of :func:`with_restarts`."""
    return (outcome.reason or "degraded") if outcome.degraded else None


class ChapterFailedError(FabulaError):
    """A chapter failed its first try and every restart; nothing of it was committed (the run is resumable)."""


def with_restarts(
    ctx: RunContext[Any],
    index: int,
    restarts: int | None,
    write: Callable[[], T],
    failure: Callable[[T], str | None],
) -> T:
    """``write()`` chapter ``index`` until ``failure`` finds nothing wrong, at most ``restarts`` + 1 times.

    ``restarts`` None: the first outcome is returned whatever it is (fabula's degraded chapter). A
    :class:`FabulaError` raised by ``write`` (no draft at all) counts as a failed try."""
    if restarts is None:
        return write()
    reason = ""
    for number in range(1, restarts + 2):
        try:
            outcome = write()
        except ChapterFailedError:
            raise
        except FabulaError as exc:
            reason = str(exc)
        else:
            found = failure(outcome)
            if found is None:
                return outcome
            reason = found
        ctx.store.ledger.record_tool_call(
            turn=0, tool=RESTART_TOOL, arguments={"try": number, "restarts": restarts}, ok=False, error=reason
        )
        left = restarts + 1 - number
        again = f"; restarting it from the checkpoint ({left} restart{'s' if left != 1 else ''} left)" if left else ""
        ctx.emit("note", f"chapter {index} failed ({reason}){again}")
    raise ChapterFailedError(
        f"chapter {index} failed {restarts + 1} time{'s' if restarts else ''} (last: {reason}); nothing of it was "
        "kept (chapter_restarts); fabula resume tries it again"
    )
