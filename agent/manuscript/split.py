"""Splitting a manuscript's text into chapters, leaving out only what is certainly not story and saying so.

The steps, in order: Project Gutenberg's header and footer go (``boilerplate``); the headings are
found (``headings``, or ``--split REGEX``); a table of contents goes when each of its entries is
matched to a later heading (``contents``), and stays as text otherwise; a short title page before
the first chapter goes, longer text there is kept as an untitled first chapter; sections headed
Contents/Preface-like before the first chapter and About-the-author-like after the last go. Every
part left out is one note with its word count and is kept in ``Manuscript.left_out`` (the run
stores it; ``import --keep-front-matter`` keeps it as chapters). Chapter numbers that repeat or go
backwards are kept in file order, with a note.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from agent.errors import InputError
from agent.manuscript import boilerplate, contents, headings
from agent.manuscript.headings import Heading
from agent.manuscript.model import Manuscript, Piece
from agent.text import count_words

TITLE_PAGE_WORD_LIMIT = 150
"""Most words before the first chapter heading that are left out as a title page; more is kept
(an untitled first chapter) since it may be story (letters, a prologue without a heading)."""


def split_text(
    text: str,
    *,
    fmt: str = "text",
    pattern: str | None = None,
    name: str = "the file",
    encoding: str | None = None,
    keep_front: bool = False,
) -> Manuscript:
    """The chapters of ``text`` (``fmt`` text, markdown or docx; only plain text is re-wrapped);
    ``keep_front``: front and back matter and a table of contents are kept as chapters too."""
    body, notes, fields, left = boilerplate.strip_gutenberg(text)
    lines = body.split("\n")
    if pattern is not None:
        found = headings.by_pattern(lines, _matcher(pattern, name))
        if not found:
            raise InputError(f"--split {pattern!r} matches no line of {name}")
    else:
        found = headings.find(lines)
    found_in: str | None  # where the title and author were found; None: nowhere
    title, author, found_in = fields.get("title"), fields.get("author"), "the Gutenberg header"
    if not title:
        title, found_in = _markdown_title(lines, found), "the book's first heading"
    if not title:
        title, byline = _front_title(lines, found)
        author, found_in = author or byline, "the book's first lines"
    found_in = found_in if title or author else None
    if not found:
        if count_words(body) == 0:
            raise InputError(f"{name} has no words of story" + (" between its Gutenberg markers" if notes else ""))
        notes.append("found no chapter headings: the book is one chapter (--split REGEX splits it)")
        return Manuscript(
            [Piece(title or "", _clean(body, fmt))],
            notes,
            fmt,
            encoding,
            title,
            author,
            found_in=found_in,
            left_out=left,
        )
    tables = [] if pattern is not None or keep_front else contents.find(lines, found)
    for table in tables:
        words = count_words("\n".join(lines[table.start : table.end]))
        left.append(Piece("table of contents", "\n".join(lines[table.start : table.end])))
        notes.append(
            f"left out a table of contents ({table.entries} entries, {words} words; each entry matched "
            "to a chapter heading)"
        )
        found = [h for h in found if not table.start <= h.line < table.end]
    separators = pattern is not None and not any(h.title for h in found)
    pieces = _pieces(lines, found, fmt, first=None if separators else found[0].line)
    if not separators:
        front = "\n".join(
            line for i, line in enumerate(lines[: found[0].line]) if not any(t.start <= i < t.end for t in tables)
        )
        pieces = _front(front, fmt, notes, left, keep=keep_front) + pieces
    if not keep_front:
        pieces, dropped = without_matter(pieces, notes)
        left += dropped
    pieces = [p for p in pieces if p.words or p.title]
    if not pieces:
        raise InputError(f"{name} has no chapters with text")
    note_numbers(pieces, notes)
    if any(p.words for p in left):
        notes.append("what was left out is kept in the run (fabula import --keep-front-matter keeps it as chapters)")
    return Manuscript(pieces, notes, fmt, encoding, title, author, found_in=found_in, left_out=left)


def _front(front: str, fmt: str, notes: list[str], left: list[Piece], *, keep: bool) -> list[Piece]:
    """The text before the first chapter heading: a short title page is left out (and kept in
    ``left``); anything longer, or anything with ``keep``, is an untitled first chapter."""
    words = count_words(front)
    if not words:
        return []
    first = next((line.strip() for line in front.split("\n") if line.strip()), "")
    if keep or words > TITLE_PAGE_WORD_LIMIT:
        if not keep:
            notes.append(
                f"kept the {words} words before the first chapter heading (from {first[:40]!r}) as "
                "chapter 1: only a title page is left out"
            )
        return [Piece("", _clean(front, fmt))]
    left.append(Piece("front matter", front))
    notes.append(f"left out front matter before the first chapter ({words} words, from {first[:40]!r})")
    return []


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
            raise InputError(
                f"--split {pattern[:80]!r} took over {SPLIT_SECONDS:g} s on {name}; a simpler pattern "
                "(one that cannot backtrack, e.g. ^Part [0-9]+) splits the book"
            ) from None

    return matches


def _pieces(lines: list[str], found: list[Heading], fmt: str, *, first: int | None) -> list[Piece]:
    bounds = [h.line for h in found] + [len(lines)]
    out = []
    if first is None and found[0].line > 0:  # --split on separators: the text before the first is chapter 1
        out.append(Piece("", _clean("\n".join(lines[: found[0].line]), fmt)))
    for h, end in zip(found, bounds[1:], strict=False):
        out.append(Piece(h.title, _clean("\n".join(lines[h.line + 1 : end]), fmt), h.number))
    return out


def without_matter(pieces: list[Piece], notes: list[str]) -> tuple[list[Piece], list[Piece]]:
    """``(kept, left out)``: sections headed like front matter (Preface, Contents...) before the
    first chapter and like back matter after the last go, each noted with its word count; empty
    sections before and after go silently."""
    start = 0
    while start < len(pieces) and (boilerplate.is_front_title(pieces[start].title) or not pieces[start].words):
        start += 1
    end = len(pieces)
    while end > start and (boilerplate.is_back_title(pieces[end - 1].title) or not pieces[end - 1].words):
        end -= 1
    dropped = []
    for what, part in (("front", pieces[:start]), ("back", pieces[end:])):
        named = [p for p in part if p.words]
        if named:
            notes.append(
                f"left out {what} matter: {', '.join(p.title or 'untitled' for p in named)} "
                f"({sum(p.words for p in named)} words)"
            )
            dropped += [Piece(f"{what} matter: {p.title or 'untitled'}", p.text, p.number) for p in named]
    return pieces[start:end], dropped


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
        [f"out of order: {', '.join(backwards[:5])}"] if backwards else []
    )
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


_BYLINE = re.compile(r"^\s*by\s+(\S.{0,80}?)\s*$", re.IGNORECASE)


def _front_title(lines: list[str], found: list[Heading]) -> tuple[str | None, str | None]:
    """``(title, author)`` from the lines before the first chapter: the first short line that is not
    front matter ("Contents", "Preface") is the title, a "by NAME" line under it the author."""
    front = [" ".join(line.split()) for line in lines[: found[0].line if found else min(len(lines), 12)]]
    front = [line.strip("#* ") for line in front if line.strip("#* ")]
    if not front or len(front[0]) > 100 or boilerplate.is_front_title(front[0]) or _BYLINE.match(front[0]):
        return None, None
    title = front[0].rstrip(".")
    author = next((m.group(1).rstrip(".") for line in front[1:6] if (m := _BYLINE.match(line))), None)
    return title, author


def _clean(text: str, fmt: str) -> str:
    """Paragraphs separated by one blank line; plain text's hard-wrapped lines joined (verse, indented, kept)."""
    paragraphs = [p.strip("\n") for p in re.split(r"\n[ \t]*\n", text) if p.strip()]
    if fmt == "text":
        paragraphs = [
            p if any(line[:1].isspace() for line in p.split("\n")) else " ".join(line.strip() for line in p.split("\n"))
            for p in paragraphs
        ]
    return "\n\n".join(p.rstrip() for p in paragraphs)
