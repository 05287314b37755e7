"""Chapters a writer has approved (``fabula reconcile --lock K..M``): kept out of any rewrite.

The set is kept in the run's plan. NstAgent's ``correct`` tool refuses a locked chapter (the model
never changes its text), and ``fabula reconcile`` lists no locked chapter for rewriting; a writer's
own ``fabula edit`` still changes one.
"""

from __future__ import annotations

import re

from agent.store.errors import StoreError
from agent.store.runstore import RunStore

LOCKED_KEY = "locked"
_RANGE = re.compile(r"^[ \t]*([0-9]{1,19})[ \t]*(?:(?:\.\.|-)[ \t]*([0-9]{1,19})[ \t]*)?$")


def parse_range(text: str, *, written: int) -> list[int]:
    """``K``, ``K..M`` or ``K-M`` as the chapters K to M, each of them written (``written``: the last
    written chapter), checked before the list is made (``StoreError``, one line, otherwise)."""
    match = _RANGE.match(text[:100])
    if not match or len(text) > 100:
        raise StoreError(f"--lock {text[:60]!r}: give a chapter K or a range K..M")
    first, last = int(match.group(1)), int(match.group(2) or match.group(1))
    if first < 1 or last < first:
        raise StoreError(f"--lock {text!r}: chapters are numbered from 1 and a range goes up (K..M with K <= M)")
    if last > written:
        raise StoreError(
            f"--lock {text!r}: chapter {max(first, written + 1)} is not written (last written: "
            f"{written}); only a written chapter is approved"
        )
    return list(range(first, last + 1))


def locked(store: RunStore) -> set[int]:
    value = store.plans.get(LOCKED_KEY)
    return {int(i) for i in value} if isinstance(value, list) else set()


def lock(store: RunStore, chapters: list[int]) -> list[int]:
    """Add ``chapters`` (written ones only) to the locked set; returns it sorted."""
    last = store.info().last_unit
    unwritten = [i for i in chapters if i > last]
    if unwritten:
        raise StoreError(
            f"--lock: chapter {unwritten[0]} is not written (last written: {last}); only a written chapter is approved"
        )
    merged = sorted(locked(store) | set(chapters))
    store.plans.put(LOCKED_KEY, merged)
    return merged
