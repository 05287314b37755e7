"""A run's story as a book: title, author line, and its sections in order.

One reader for every book-shaped output (Markdown, EPUB, HTML, the web view), so that a
chapter's heading, its degraded mark and the order of Magnet paragraphs are decided once.
NstAgent-family runs have one section per chapter; a Magnet run has one section per
timestep (``by_step``) or, for exports, one section holding every paragraph.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.store.export.markdown import author_line, series_of, story_title
from agent.store.export.titles import Headings, chapter_heading
from agent.store.runstore import RunStore


@dataclass(frozen=True)
class Section:
    """One chapter (or Magnet timestep): its number, heading and text blocks."""

    index: int
    heading: str
    paragraphs: list[str]
    text: str
    words: int
    degraded: bool = False
    degraded_reason: str | None = None
    kinds: list[str] = field(default_factory=list)
    version: int = 1


@dataclass(frozen=True)
class Book:
    title: str
    author: str
    pipeline: str
    model: str | None
    unit_kind: str
    sections: list[Section]
    series: tuple[str, int] | None = None
    """The series' name and this book's number in it (a sequel), else None."""

    @property
    def words(self) -> int:
        return sum(s.words for s in self.sections)


def heading(index: int, title: str) -> str:
    return chapter_heading(index, title)


def blocks(text: str) -> list[str]:
    """Paragraphs of a chapter: split at blank lines, empty ones dropped."""
    parts = [p.strip("\n") for p in text.replace("\r\n", "\n").split("\n\n")]
    return [p for p in parts if p.strip()]


def read_book(store: RunStore, *, by_step: bool = False) -> Book:
    info = store.info()
    sections: list[Section] = []
    chapters = store.chapters()
    if chapters:
        headings = Headings.of(store)
        sections = [
            Section(
                c.index,
                headings.heading(c.index, c.title),
                blocks(c.text),
                c.text,
                c.words,
                c.degraded,
                c.degraded_reason,
                version=c.version,
            )
            for c in chapters
        ]
    else:
        paragraphs = store.paragraphs()
        if by_step:
            steps: dict[int, list] = {}
            for p in paragraphs:
                steps.setdefault(p.step, []).append(p)
            sections = [
                Section(
                    step,
                    f"Step {step}",
                    [p.text for p in ps],
                    "\n\n".join(p.text for p in ps),
                    sum(p.words for p in ps),
                    kinds=[p.kind for p in ps],
                )
                for step, ps in steps.items()
            ]
        elif paragraphs:
            sections = [
                Section(
                    1,
                    story_title(store),
                    [p.text for p in paragraphs],
                    "\n\n".join(p.text for p in paragraphs),
                    sum(p.words for p in paragraphs),
                    kinds=[p.kind for p in paragraphs],
                )
            ]
    return Book(
        story_title(store), author_line(store), info.pipeline, info.model, info.unit_kind, sections, series_of(store)
    )
