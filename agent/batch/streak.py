"""A batch stops starting stories once several in a row failed with the same cause.

A dead or refusing server fails every story the same way within seconds; without this a
900-prompt batch would churn through all of them and mark each failed. The stories not
started stay pending for ``fabula batch resume``."""

from __future__ import annotations

import re
import threading

SAME_CAUSE_LIMIT = 3
"""Consecutive failures with one cause after which no further story is started."""
_VARYING = re.compile(r"\d+")


class FailureStreak:
    """Counts consecutive failed stories with the same cause (thread-safe)."""

    def __init__(self, limit: int = SAME_CAUSE_LIMIT) -> None:
        self.limit = limit
        self._cause: str | None = None
        self._count = 0
        self._lock = threading.Lock()
        self.tripped: str | None = None
        """The cause once ``limit`` stories in a row failed with it; ``None`` until then."""

    def record(self, status: str, error: str | None) -> None:
        with self._lock:
            if status != "failed" or not error:
                if status == "completed":
                    self._cause, self._count = None, 0
                return
            cause = _VARYING.sub("N", error)  # a chapter number or a story's id does not make a new cause
            self._count = self._count + 1 if cause == self._cause else 1
            self._cause = cause
            if self._count >= self.limit and self.tripped is None:
                self.tripped = error

    def describe(self, pending: int) -> str:
        return (
            f"stopped starting stories: {self.limit} in a row failed with the same cause ({self.tripped}); "
            f"{pending} not started {'is' if pending == 1 else 'are'} pending for fabula batch resume"
        )
