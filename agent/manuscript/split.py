"""Splitting a manuscript's text into chapters, leaving out what is not story and saying so.

The steps, in order: Project Gutenberg's header and footer go (``boilerplate``); the headings are
found (``headings``, or ``--split REGEX``); a table of contents (three or more headings with
next to nothing between them) is not chapters; what comes before the first chapter is
front matter and goes, as do Contents/Preface-like sections before it and About-the-author-like
ones after the last. Chapter numbers that repeat or go backwards are kept in file order, with a note.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable

from agent.errors import InputError
from agent.manuscript import boilerplate, headings
from agent.manuscript.headings import Heading
from agent.manuscript.model import Manuscript, Piece
from agent.text import count_words

TOC_RUN = 3
"""Headings in a row, with next to nothing between them, that make a table of contents."""
TOC_GAP_WORDS = 12
"""Most words between two entries of a contents list (an entry's title wrapped onto a second line)."""


def split_text(text: str, *, fmt: str = "text", pattern: str | None = None, name: str = "the file",
               encoding: str | None = None) -> Manuscript:
    """The chapters of ``text`` (``fmt`` text, markdown or docx; only plain text is re-wrapped)."""
    body, notes, fields = boilerplate.strip_gutenberg(text)
    lines = body.split("\n")
    if pattern is not None:
        found = headings.by_pattern(lines, _matcher(pattern, name))
        if not found:
            raise InputError(f"--split {pattern!r} matches no line of {name}")
    else:
        found = headings.find(lines)
    title = fields.get("title") or _markdown_title(lines, found)
    if not found:
        if count_words(body) == 0:
            raise InputError(f"{name} has no words of story" + (" between its Gutenberg markers" if notes else ""))
        notes.append("found no chapter headings: the book is one chapter (--split REGEX splits it)")
        return Manuscript([Piece(title or "", _clean(body, fmt))], notes, fmt, encoding, title, fields.get("author"))
    kept, toc = _without_contents(lines, found)
    if not kept:  # every heading "a contents entry": a book of very short chapters, not a contents list alone
        kept, toc = found, 0
    found = kept
    if toc:
        notes.append(f"left out a table of contents ({toc} entries)")
    separators = pattern is not None and not any(h.title for h in found)
    pieces = _pieces(lines, found, fmt, first=None if separators else found[0].line)
    if not separators:
        front = "\n".join(lines[: found[0].line])
        _note_front(front, notes)
    pieces = without_matter(pieces, notes)
    if not pieces:
        raise InputError(f"{name} has no chapters with text")
    note_numbers(pieces, notes)
    return Manuscript(pieces, notes, fmt, encoding, title, fields.get("author"))


SPLIT_SECONDS = 5.0
"""The time the user's ``--split`` pattern may take over the whole book: a pattern that backtracks
(``(a+)+$``) is refused in one line instead of running for hours."""
SPLIT_LINE = 1000
"""Characters of each line the ``--split`` pattern sees (a heading is one short line)."""


def _matcher(pattern: str, name: str) -> Callable[[str], bool]:
    """``--split``: a line test with the pattern compiled by ``regex`` (Python's ``re`` syntax) so a
    search can be stopped: the whole book gets :data:`SPLIT_SECONDS`."""
    import regex

    try:
        compiled = regex.compile(pattern, flags=regex.VERSION0)
    except (regex.error, ValueError, OverflowError, RecursionError) as exc:
        raise InputError(f"--split {pattern[:80]!r} is not a regular expression: {exc}") from None
    deadline = time.monotonic() + SPLIT_SECONDS

    def matches(line: str) -> bool:
        left = deadline - time.monotonic()
        try:
            if left <= 0:
                raise TimeoutError
            return compiled.search(line[:SPLIT_LINE], timeout=left) is not None
        except TimeoutError:
            raise InputError(f"--split {pattern[:80]!r} took over {SPLIT_SECONDS:g} s on {name}; a simpler pattern "
                             "(one that cannot backtrack, e.g. ^Part [0-9]+) splits the book") from None

    return matches


def _without_contents(lines: list[str], found: list[Heading]) -> tuple[list[Heading], int]:
    """The headings with every table-of-contents run taken out, and how many entries it had."""
    runs: list[list[Heading]] = [[found[0]]]
    for prev, cur in itertools.pairwise(found):
        if count_words("\n".join(lines[prev.line + 1: cur.line])) <= TOC_GAP_WORDS:
            runs[-1].append(cur)
        else:
            runs.append([cur])
    kept = [h for run in runs if len(run) < TOC_RUN for h in run]
    return kept, len(found) - len(kept)


def _pieces(lines: list[str], found: list[Heading], fmt: str, *, first: int | None) -> list[Piece]:
    bounds = [h.line for h in found] + [len(lines)]
    out = []
    if first is None and found[0].line > 0:  # --split on separators: the text before the first is chapter 1
        out.append(Piece("", _clean("\n".join(lines[: found[0].line]), fmt)))
    for h, end in zip(found, bounds[1:], strict=False):
        out.append(Piece(h.title, _clean("\n".join(lines[h.line + 1: end]), fmt), h.number))
    return out


def without_matter(pieces: list[Piece], notes: list[str]) -> list[Piece]:
    """Front matter sections before the first chapter, back matter after the last, empty ones."""
    start = 0
    while start < len(pieces) and (boilerplate.is_front_title(pieces[start].title) or not pieces[start].words):
        start += 1
    end = len(pieces)
    while end > start and (boilerplate.is_back_title(pieces[end - 1].title) or not pieces[end - 1].words):
        end -= 1
    for what, dropped in (("front", pieces[:start]), ("back", pieces[end:])):
        named = [p.title or "untitled" for p in dropped if p.words]
        if named:
            notes.append(f"left out {what} matter: {', '.join(named)} ({sum(p.words for p in dropped)} words)")
    kept = [p for p in pieces[start:end] if p.words or p.title]
    return kept


def _note_front(front: str, notes: list[str]) -> None:
    words = count_words(front)
    if words:
        first = next((line.strip() for line in front.split("\n") if line.strip()), "")
        notes.append(f"left out front matter before the first chapter ({words} words, from {first[:40]!r})")


def note_numbers(pieces: list[Piece], notes: list[str]) -> None:
    """One line when chapter numbers repeat or go backwards: the file's order is kept."""
    seen: set[int] = set()
    repeated, backwards = [], []
    last: int | None = None
    for p in pieces:
        if p.number is None:
            continue
        if p.number in seen:
            repeated.append(p.number)
        elif last is not None and p.number < last:
            backwards.append(f"{p.number} after {last}")
        seen.add(p.number)
        last = p.number
    problems = ([f"repeated: {', '.join(map(str, repeated[:5]))}"] if repeated else []) + (
        [f"out of order: {', '.join(backwards[:5])}"] if backwards else [])
    if problems:
        notes.append(f"chapter numbers {'; '.join(problems)}; the chapters are kept in file order")


def _markdown_title(lines: list[str], found: list[Heading]) -> str | None:
    """A single shallower ``#`` heading before the chapters is the book's title."""
    if not found or not found[0].level:
        return None
    for line in lines[: found[0].line]:
        m = headings.MARKDOWN.match(line)
        if m and len(m.group(1)) < found[0].level:
            return m.group(2).strip()
    return None


def _clean(text: str, fmt: str) -> str:
    """Paragraphs separated by one blank line; plain text's hard-wrapped lines joined (verse, indented, kept)."""
    paragraphs = [p.strip("\n") for p in re.split(r"\n[ \t]*\n", text) if p.strip()]
    if fmt == "text":
        paragraphs = [p if any(line[:1].isspace() for line in p.split("\n")) else
                      " ".join(line.strip() for line in p.split("\n")) for p in paragraphs]
    return "\n\n".join(p.rstrip() for p in paragraphs)
