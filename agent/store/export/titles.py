"""The heading a reader sees for each chapter, decided once for every page and export.

A written run's chapter is headed by its *planned* title (the planner's, or the writer's from
``fabula outline --edit``), not the title the model happened to give its ``write`` call, so an
edited outline reaches the book. An imported book keeps its own headings as the source names
them ("Prologue", "CHAPTER 1. Loomings.", "Epilogue"): numbering them again would shift every
number after a prologue.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from agent.store.runstore import RunStore

IMPORTED_KIND = "imported"
"""The run kind ``fabula import`` makes (``agent.manuscript.kind``): its headings are kept verbatim."""


def one_line(text: str) -> str:
    return " ".join(text.split())


def chapter_heading(index: int, title: str) -> str:
    """``Chapter N: TITLE``; a title that only repeats "Chapter N" (what a model often names a chapter),
    or opens with it, is not said twice: "Chapter 1" and "Chapter 1: The Bell", never "Chapter 1: Chapter 1"."""
    title = re.sub(rf"^chapter\s+{index}(?!\d)\s*[:.\-\u2013\u2014]*\s*", "", one_line(title), flags=re.IGNORECASE)
    return f"Chapter {index}: {title}" if title else f"Chapter {index}"


@dataclass(frozen=True)
class Headings:
    """The planned titles of a run (chapter number -> title) and whether its headings are the source's own."""

    planned: dict[int, str] = field(default_factory=dict)
    verbatim: bool = False

    @classmethod
    def of(cls, store: RunStore) -> Headings:
        return cls(planned_titles(store), store.info().pipeline == IMPORTED_KIND)

    def title(self, index: int, stored: str | None) -> str:
        """The chapter's title without its number: the planned one, else the stored one (may be empty)."""
        planned = self.planned.get(index)
        return planned if planned else one_line(stored or "")

    def heading(self, index: int, stored: str | None) -> str:
        """What a chapter is headed with in the book, its contents and every export."""
        if self.verbatim:
            return one_line(stored or "") or f"Chapter {index}"
        return chapter_heading(index, self.title(index, stored))


def planned_titles(store: RunStore) -> dict[int, str]:
    """Chapter number -> title from the run's outline (empty for a run with no outline)."""
    outline = store.plans.get("outline")
    titles: dict[int, str] = {}
    for n, item in enumerate(outline if isinstance(outline, list) else [], start=1):
        if isinstance(item, dict) and isinstance(item.get("title"), str) and item["title"].strip():
            titles[item["id"] if isinstance(item.get("id"), int) else n] = one_line(item["title"])
    return titles
