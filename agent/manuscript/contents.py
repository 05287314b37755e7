"""A table of contents, recognised with certainty: a run of heading-like lines whose every entry is
matched, in order, to a chapter heading later in the book.

Only such a list is left out. A run of short headings with next to nothing between them that the
book does not repeat later (a book of very short chapters, a list of parts) is kept as text: the
importer never drops words on a guess. Entries are matched by their number (``CHAPTER XII.``,
``XII  The Storm``, ``Letter 4``) or their name (``Prologue``, ``Epilogue``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.manuscript import headings
from agent.manuscript.headings import Heading
from agent.text import count_words

TOC_RUN = 3
"""Entries in a row that can make a table of contents."""
TOC_GAP_WORDS = 12
"""Most words between two entries of a contents list (an entry's title wrapped onto a second line)."""
ENTRY = re.compile(rf"^(?:(chapter|chap\.|letter)[ \t]+)?({headings.NUMBER})\b\.?(?:[ \t]*[.:—–-]?[ \t]*(.*))?$", re.I)
"""A contents entry: ``Chapter 12``, ``CHAPTER XII. Title``, ``XII  Title``, ``Letter 4`` (a word
number needs its ``Chapter``)."""
_BARE = re.compile(r"^(?:\d{1,4}|[IVXLCDM]+)(?:\.|[ \t]{2,}|$)")
"""An entry without ``Chapter``: its number then a full stop, a column gap or nothing (never ``I went``)."""
MAX_TRIES = 4
"""Places a list's end is tried at (its end, and where its first entry comes again)."""
HEADER = re.compile(r"^(?:(?:table of )?contents|chapters?|page)\.?$", re.I)
"""The heading of a contents list and its column heads, left out with it."""


@dataclass(frozen=True)
class Contents:
    """A table of contents found and matched: its lines ``[start, end)`` and its entry count."""

    start: int
    end: int
    entries: int


def key(text: str) -> tuple[str, int | str, str | None] | None:
    """What a heading or an entry names: ``("n", 12, "chapter")`` or ``("s", "epilogue", None)``."""
    line = text.strip()
    if not line or len(line) > headings.MAX_HEADING:
        return None
    special = headings.SPECIAL.match(line)
    if special:
        return "s", special.group(1).lower(), None
    m = ENTRY.match(line)
    if m is None or (m.group(1) is None and not _BARE.match(line)):
        return None
    number = headings.number_of(m.group(2))
    return None if number is None else ("n", number, _word(m.group(1)))


def _word(word: str | None) -> str | None:
    return None if word is None else {"chap.": "chapter"}.get(word.lower(), word.lower())


def _same(entry: tuple, heading: tuple | None) -> bool:
    if heading is None or entry[:2] != heading[:2]:
        return False
    return entry[2] is None or heading[2] is None or entry[2] == heading[2]


def find(lines: list[str], found: list[Heading]) -> list[Contents]:
    """Every table of contents of ``lines`` whose entries all match, in order, a heading of ``found``
    after the list (checked, so a list the book does not repeat is never one)."""
    out: list[Contents] = []
    for run in _runs(lines):
        if len(run) < TOC_RUN:
            continue
        keys = [k for i in run if (k := key(lines[i])) is not None]  # all of them: a run is of entry lines
        # the list may run straight into the book: where its first entry comes again, the book begins
        ends = [len(run), *(j for j in range(TOC_RUN, len(run)) if _same(keys[0], keys[j]))][:MAX_TRIES]
        for end in sorted(ends, reverse=True):
            after = [k for h in found if h.line > run[end - 1] and (k := key(lines[h.line])) is not None]
            if _matched(keys[:end], after):
                out.append(Contents(_header_above(lines, run[0]), run[end - 1] + 1, end))
                break
    return out


def lists(entries: list[str], headings_after: list[str], names: list[str]) -> bool:
    """Whether ``entries`` (an EPUB item's paragraphs) are a table of contents: at least
    :data:`TOC_RUN` numbered or named entries, each matched in order to one of ``headings_after``,
    and every other entry the exact title of an item of the book (``names``)."""
    keyed = [k for e in entries if (k := key(e)) is not None]
    titled = {" ".join(n.split()).lower() for n in names if n}
    others = [e for e in entries if e.strip() and key(e) is None]
    after = [k for h in headings_after if (k := key(h)) is not None]
    return (
        len(keyed) >= TOC_RUN and all(" ".join(e.split()).lower() in titled for e in others) and _matched(keyed, after)
    )


def _runs(lines: list[str]) -> list[list[int]]:
    """Runs of entry lines with at most :data:`TOC_GAP_WORDS` words of other text between them."""
    runs: list[list[int]] = []
    gap = 0
    for i, line in enumerate(lines):
        if len(line) <= headings.MAX_HEADING_LINE and key(line) is not None:
            if runs and runs[-1] and gap <= TOC_GAP_WORDS:
                runs[-1].append(i)
            else:
                runs.append([i])
            gap = 0
        elif line.strip():
            gap += count_words(line) if len(line) < 10_000 else TOC_GAP_WORDS + 1
    return runs


def _matched(entries: list, after: list) -> bool:
    """Each entry, in order, names one of the headings ``after`` the list (a subsequence)."""
    position = 0
    for entry in entries:
        while position < len(after) and not _same(entry, after[position]):
            position += 1
        if position == len(after):
            return False
        position += 1
    return True


def _header_above(lines: list[str], first: int) -> int:
    """The list's first line: its ``Contents`` heading and column heads above it, blank lines between."""
    start = i = first
    while i > 0:
        i -= 1
        text = lines[i].strip()
        if not text:
            continue
        if not HEADER.match(text):
            break
        start = i
    return start
