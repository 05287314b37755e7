"""A sign of life on a long model call: every ``EVERY_S`` seconds a call has not returned, each
listener hears its role, the seconds it has taken and the tokens generated so far (where the
backend sees them arrive: a streamed reply, the embedded decoder); ``None`` where it cannot.

The CLI listens (one line on stderr per beat), so ``fabula check`` or ``derive`` never sits silent
for minutes while one judgment or one state update is generated.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

EVERY_S = 10.0
"""Seconds between two beats of one call (the first after as long)."""

Listener = Callable[[str | None, float, int | None], None]
LISTENERS: list[Listener] = []
"""Called as ``listener(role, elapsed_s, tokens_so_far)`` from a timer thread."""

_current = threading.local()


class _Call:
    def __init__(self, role: str | None) -> None:
        self.role, self.started, self.tokens = role, time.monotonic(), None
        self.done = threading.Event()

    def beat(self) -> None:
        while not self.done.wait(EVERY_S):
            for listener in list(LISTENERS):
                with suppress(Exception):  # a listener's failure must never break the call it reports on
                    listener(self.role, time.monotonic() - self.started, self.tokens)


@contextmanager
def watched(role: str | None) -> Iterator[None]:
    """Around one model call: beats while it lasts (nothing at all when no one listens)."""
    if not LISTENERS:
        yield
        return
    call = _Call(role)
    outer = getattr(_current, "call", None)
    _current.call = call
    thread = threading.Thread(target=call.beat, name="fabula-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        call.done.set()
        _current.call = outer


def note_tokens(count: int) -> None:
    """The call under way in this thread has generated ``count`` tokens so far."""
    call = getattr(_current, "call", None)
    if call is not None:
        call.tokens = count
