"""One chapter of the frozen outline, typed: what the chapter loop reads of its plan item.

The stored plan (the run's plan table, the plan cache) keeps the outline as JSON dicts, byte for
byte as before; this type is built from one at the boundary so no caller indexes ``item["target_words"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PlannedChapter:
    """A chapter as the outline (``grammars.nst.OutlineChapter``) plans it: number, title, length."""

    id: int
    title: str
    description: str
    target_words: int

    @classmethod
    def of(cls, item: Mapping[str, Any]) -> PlannedChapter:
        """The typed view of one stored outline item (its ``target_words`` read as a whole number)."""
        return cls(
            id=item["id"],
            title=item["title"],
            description=item.get("description", ""),
            target_words=int(item["target_words"]),
        )
