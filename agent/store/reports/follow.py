"""Following a run while it is written: each unit's text as soon as it is committed.

Polls a read-only connection (WAL readers see every committed transaction, never a unit half
written) and yields chapters, or a Magnet step's paragraphs, once each and in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from agent.store.export.book import heading
from agent.store.runstore import RunStore


@dataclass(frozen=True)
class Committed:
    """One committed unit: its number, a heading (chapters) and its text blocks."""

    unit: int
    heading: str | None
    paragraphs: list[tuple[str, str]]
    degraded_reason: str | None = None
    degraded: bool = False


def committed_after(store: RunStore, unit: int) -> list[Committed]:
    """Every unit after ``unit`` that is committed now, in order."""
    info = store.info()
    if info.unit_kind == "chapter":
        return [
            Committed(c.index, heading(c.index, c.title), [("chapter", c.text)], c.degraded_reason, c.degraded)
            for c in store.chapters()
            if c.index > unit
        ]
    steps: dict[int, list[tuple[str, str]]] = {}
    for p in store.paragraphs():
        if p.step > unit:
            steps.setdefault(p.step, []).append((p.kind, p.text))
    last = info.last_unit
    return [Committed(step, None, steps.get(step, [])) for step in range(unit + 1, last + 1)]


def follow(
    store: RunStore,
    *,
    after: int = 0,
    interval: float = 1.0,
    keep_waiting: bool = False,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Committed]:
    """Yield units as they commit; stop once the run is no longer running (unless ``keep_waiting``)."""
    seen = after
    while True:
        running = store.live_status() in ("running", "created")
        for unit in committed_after(store, seen):
            seen = unit.unit
            yield unit
        if not running and not keep_waiting:
            # one last look: a unit may have been committed between the status check and the read
            for unit in committed_after(store, seen):
                seen = unit.unit
                yield unit
            return
        sleep(interval)
