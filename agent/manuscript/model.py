"""What reading a manuscript gives: its chapters in file order and one note per thing left out."""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.text import count_words


@dataclass(frozen=True)
class Piece:
    """One chapter as found in the file: its heading (``title``), its text, the number its heading gives."""

    title: str
    text: str
    number: int | None = None

    @property
    def words(self) -> int:
        """Words under the store's one rule, so the dry run says what ``fabula show`` will."""
        return count_words(self.text)


@dataclass(frozen=True)
class Manuscript:
    """A book read from a file: chapters, notes for the writer, and where it came from."""

    pieces: list[Piece]
    notes: list[str] = field(default_factory=list)
    """One line per thing recognised and left out, or kept but worth saying (chapter numbers out of order)."""
    format: str = "text"
    encoding: str | None = None
    title: str | None = None
    author: str | None = None
    found_in: str | None = None
    """Where title and author were found ("the Gutenberg header", "the EPUB's metadata", "the first lines")."""
    left_out: list[Piece] = field(default_factory=list)
    """Every part of the file not made a chapter (``title``: what it is), kept by the run so it can be
    restored; each is also one of ``notes``, with its word count."""

    @property
    def words(self) -> int:
        return sum(p.words for p in self.pieces)
