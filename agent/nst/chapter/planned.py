"""The frozen plan, typed: what the chapter loop and the baselines read of the run's plan.

The stored plan (the run's plan table, the plan cache) keeps the outline as JSON dicts, byte for
byte as before; :class:`Plan` is built from it at the boundary (``agent.nst.plan.frozen``) so no
writer of a chapter indexes ``plan["outline"][i]["target_words"]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agent.store import StoreError


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

    def as_json(self) -> dict[str, Any]:
        """The outline item as stored, its keys in the outline grammar's order."""
        return {"id": self.id, "title": self.title, "description": self.description, "target_words": self.target_words}


@dataclass(frozen=True)
class Plan:
    """The plan a run writes from: its chapters typed, with every record of the run's plan table."""

    chapters: tuple[PlannedChapter, ...]
    records: Mapping[str, Any]
    """The plan table as stored (title, premise, synopsis, digest, source, ...), outline included."""

    @classmethod
    def of(cls, records: Mapping[str, Any]) -> Plan:
        """The typed plan of a run's plan records; :class:`StoreError` when no outline is stored yet."""
        outline = records.get("outline")
        if not isinstance(outline, list):
            raise StoreError("the run has no stored outline")
        return cls(tuple(PlannedChapter.of(item) for item in outline), records)

    def chapter(self, index: int) -> PlannedChapter:
        """Chapter ``index`` (from 1) of the outline."""
        return self.chapters[index - 1]

    @property
    def title(self) -> str | None:
        return self.records.get("title")
