"""What in a manuscript file is not the story: Project Gutenberg's licence, front and back matter.

Each is recognised by a rule a reader can check (the Gutenberg marker lines; a heading such as
"Contents" or "Preface" before the first chapter) and left out with one note saying what went.
"""

from __future__ import annotations

import re

from agent.manuscript.model import Piece

GUTENBERG_START = re.compile(r"^[ \t]*\*{3}[ \t]*START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK[^\n]*$", re.I | re.M)
GUTENBERG_END = re.compile(r"^[ \t]*\*{3}[ \t]*END OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK[^\n]*$", re.I | re.M)
OLD_END = re.compile(r"^[ \t]*End of (?:the )?Project Gutenberg'?s?[ \t][^\n]*$", re.I | re.M)
"""The line older Gutenberg files put before their footer ("End of Project Gutenberg's Emma")."""
_HEADER_FIELD = re.compile(r"^(Title|Author):[ \t]*(.+)$", re.M)

FRONT_TITLES = re.compile(
    r"^(?:(?:table of )?contents|preface|foreword|dedication|copyright|acknowledge?ments?|title page|"
    r"introduction|epigraph|transcriber'?s? notes?|illustrations|list of illustrations|also by .*|"
    r"about the author|half[- ]title|cover|colophon|note on the text)\W*$",
    re.I,
)
"""Headings of front matter (left out before the first chapter) and back matter (after the last)."""
BACK_TITLES = re.compile(
    r"^(?:about the author|acknowledge?ments?|also by .*|colophon|"
    r"transcriber'?s? notes?|footnotes|notes)\W*$",
    re.I,
)


OLD_END_REACH = 40
"""Lines above the END marker an older-style end line may stand (it sits just before the licence)."""


def strip_gutenberg(text: str) -> tuple[str, list[str], dict[str, str], list[Piece]]:
    """The text between Project Gutenberg's START and END lines, the notes saying so (with word
    counts), the header's Title and Author (the book's own metadata) and the parts left out (kept
    by the run, so nothing is lost). The older end line ("End of the Project Gutenberg EBook of
    ...") just above the END marker goes with the footer."""
    notes: list[str] = []
    fields: dict[str, str] = {}
    left: list[Piece] = []
    start = GUTENBERG_START.search(text)
    if start:
        header = text[: start.end()]
        fields = {m.group(1).lower(): " ".join(m.group(2).split()) for m in _HEADER_FIELD.finditer(header)}
        left.append(Piece("Project Gutenberg header", header))
        notes.append(
            f"left out the Project Gutenberg header ({_lines(header)} lines, {left[-1].words} words, up "
            "to its START line)"
        )
        text = text[start.end() :]
    end = _end(text)
    if end is not None:
        footer = text[end:]
        left.append(Piece("Project Gutenberg licence footer", footer))
        notes.append(
            f"left out the Project Gutenberg licence footer ({_lines(footer)} lines, {left[-1].words} "
            "words, from its end line)"
        )
        text = text[:end]
    return text, notes, fields, left


def _end(text: str) -> int | None:
    """Where the footer starts: the END marker, or an older end line above it (or alone)."""
    marker = GUTENBERG_END.search(text)
    older = [m for m in OLD_END.finditer(text) if marker is None or m.start() < marker.start()]
    if marker is None:
        return older[0].start() if older else None
    if older and text.count("\n", older[-1].start(), marker.start()) <= OLD_END_REACH:
        return older[-1].start()
    return marker.start()


def is_front_title(title: str) -> bool:
    return bool(FRONT_TITLES.match(title.strip()))


def is_back_title(title: str) -> bool:
    return bool(BACK_TITLES.match(title.strip()))


def _lines(text: str) -> int:
    return len(text.strip("\n").splitlines())
