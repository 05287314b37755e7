"""What in a manuscript file is not the story: Project Gutenberg's licence, front and back matter.

Each is recognised by a rule a reader can check (the Gutenberg marker lines; a heading such as
"Contents" or "Preface" before the first chapter) and left out with one note saying what went.
"""

from __future__ import annotations

import re

GUTENBERG_START = re.compile(r"^[ \t]*\*{3}[ \t]*START OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK[^\n]*$", re.I | re.M)
GUTENBERG_END = re.compile(r"^[ \t]*\*{3}[ \t]*END OF (?:THE|THIS) PROJECT GUTENBERG E-?BOOK[^\n]*$", re.I | re.M)
OLD_END = re.compile(r"^[ \t]*End of (?:the )?Project Gutenberg'?s?[ \t][^\n]*$", re.I | re.M)
"""The line older Gutenberg files put before their footer ("End of Project Gutenberg's Emma")."""
_HEADER_FIELD = re.compile(r"^(Title|Author):[ \t]*(.+)$", re.M)

FRONT_TITLES = re.compile(
    r"^(?:(?:table of )?contents|preface|foreword|dedication|copyright|acknowledge?ments?|title page|"
    r"introduction|epigraph|transcriber'?s? notes?|illustrations|list of illustrations|also by .*|"
    r"about the author|half[- ]title|cover|colophon|note on the text)\W*$", re.I)
"""Headings of front matter (left out before the first chapter) and back matter (after the last)."""
BACK_TITLES = re.compile(r"^(?:about the author|acknowledge?ments?|also by .*|colophon|"
                         r"transcriber'?s? notes?|footnotes|notes)\W*$", re.I)


def strip_gutenberg(text: str) -> tuple[str, list[str], dict[str, str]]:
    """The text between Project Gutenberg's START and END lines, the notes saying so, and the
    header's Title and Author (the book's own metadata)."""
    notes: list[str] = []
    fields: dict[str, str] = {}
    start = GUTENBERG_START.search(text)
    if start:
        header = text[: start.start()]
        fields = {m.group(1).lower(): " ".join(m.group(2).split()) for m in _HEADER_FIELD.finditer(header)}
        notes.append(f"left out the Project Gutenberg header ({_lines(header) + 1} lines, up to its START line)")
        text = text[start.end():]
    end = GUTENBERG_END.search(text) or OLD_END.search(text)
    if end:
        footer = text[end.start():]
        notes.append(f"left out the Project Gutenberg licence footer ({_lines(footer)} lines, from its END line)")
        text = text[: end.start()]
    return text, notes, fields


def is_front_title(title: str) -> bool:
    return bool(FRONT_TITLES.match(title.strip()))


def is_back_title(title: str) -> bool:
    return bool(BACK_TITLES.match(title.strip()))


def _lines(text: str) -> int:
    return len(text.strip("\n").splitlines())
