"""A stopwatch for one in-process call, split into the parts of :data:`agent.llm.types.TIMING_PARTS`.

Why: a real run decoded several times slower than the engine bench, and only a split of each
call's time (cache switch, compile, prefill, decode, mask, sampling) says which part to fix.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from agent.llm.types import TIMING_PARTS, CallTiming


class CallClock:
    """Seconds spent per part; :meth:`part` times a block, :meth:`timed` wraps a callable."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(TIMING_PARTS, 0.0)

    @contextmanager
    def part(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - started

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] += seconds

    def timed(self, name: str, call: Callable[..., Any]) -> Callable[..., Any]:
        """``call`` with its time added to ``name`` (a logits processor keeps its ``accept``)."""
        clock = self

        class Timed:
            def __call__(self, *args: Any) -> Any:
                started = time.perf_counter()
                try:
                    return call(*args)
                finally:
                    clock.seconds[name] += time.perf_counter() - started

            def __getattr__(self, attribute: str) -> Any:
                return getattr(call, attribute)

        return Timed()

    def timing(self) -> CallTiming:
        return CallTiming(**self.seconds)
