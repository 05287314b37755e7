"""The versions page: every edited unit's versions, a word-level diff between any two of them, and
the later units an edit made stale (read from :mod:`agent.store.writer.versions`, as the CLI reads them)."""

from __future__ import annotations

import time
from typing import Any

from agent.pipelines import after_edit
from agent.store import RunStore
from agent.store.writer.versions import changed_words, edited_units, stale, unit_versions, word_diff


def versions(store: RunStore, unit: int | None = None, a: int | None = None, b: int | None = None) -> dict[str, Any]:
    """The edited units; for ``unit`` (default: the first edited), versions ``a`` and ``b`` compared
    (default: as first written against the current text)."""
    edited: list[dict[str, Any]] = [{"unit": u, "versions": unit_versions(store, u)} for u in edited_units(store)]
    chosen = next((e for e in edited if e["unit"] == unit), edited[0] if edited else None)
    diff, removed, added = None, 0, 0
    if chosen is not None:
        count = len(chosen["versions"])
        a = a if a is not None and 1 <= a <= count else 1
        b = b if b is not None and 1 <= b <= count else count
        diff = word_diff(chosen["versions"][a - 1].text, chosen["versions"][b - 1].text)
        removed, added = changed_words(diff)
    stale_units = stale(store)
    return {
        "edited": edited,
        "chosen": chosen,
        "a": a,
        "b": b,
        "diff": diff,
        "removed": removed,
        "added": added,
        "stale_units": stale_units,
        "when": _when,
        "after_edit": after_edit(store, stale_units.unit) if stale_units else None,
    }


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at))
