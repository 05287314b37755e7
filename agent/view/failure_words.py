"""A chapter whose state could not be derived, told in a writer's words on the State page.

``fabula derive`` marks such a chapter with a bookkeeping record (``ok: false``, a Unix time, the
update's first error line, which names the model's tool and ends with an instruction meant for the
model). A writer reads when it happened, what failed, in which part of the update, and what to run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

TOOL_WORDS = {
    "upsert_character_state": "updating a character",
    "add_past_event": "adding a past event",
    "add_future_requirement": "adding an open requirement",
    "resolve_future_requirement": "resolving an open requirement",
}
"""The update's tools (NstAgent's state operations) as a writer names them."""

_TOOL = re.compile(r"\b(" + "|".join(TOOL_WORDS) + r")\b(?:\s+'([^']*)'|\s+\"([^\"]*)\")?:?\s*")


@dataclass(frozen=True)
class Failure:
    """A failed chapter as the State page tells it."""

    when: str
    what: str
    tool: str | None
    attempts: int


def failure(record: dict[str, Any] | None) -> Failure | None:
    """A failed derive's record (``UnitState.failed``) in a writer's words (None when there is none)."""
    if not record:
        return None
    error = str(record.get("error") or "the update was not applied")
    tool = None
    found = _TOOL.search(error)
    if found:
        tool = TOOL_WORDS[found.group(1)]
        name = found.group(2) or found.group(3)
        tool += f" ({name})" if name else ""
        error = error[found.end() :]
    else:
        error = error.split(": ", 1)[-1] if error.startswith("update rejected") else error
    what = error.split("; ", 1)[0].strip().rstrip(".") or "the update was not applied"
    return Failure(_when(record.get("at")), what, tool, int(record.get("attempts") or 1))


def _when(at: Any) -> str:
    try:
        return datetime.fromtimestamp(float(at), UTC).strftime("%-d %b %Y, %H:%M UTC")
    except (TypeError, ValueError, OverflowError, OSError):
        return "at a time not recorded"
