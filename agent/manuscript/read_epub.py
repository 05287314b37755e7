"""EPUB manuscripts (ebooklib): one chapter per spine item, in the spine's reading order.

Items before the first one titled like a chapter are front matter when some item is (a Gutenberg
EPUB's title page, contents and licence items); Gutenberg's markers are honoured inside items;
items without words (a cover image) go silently.
"""

from __future__ import annotations

import zipfile
from html.parser import HTMLParser
from pathlib import Path

from agent.errors import InputError
from agent.manuscript import boilerplate, contents, headings
from agent.manuscript.archive import members
from agent.manuscript.model import Manuscript, Piece
from agent.manuscript.read_text import checked_size
from agent.manuscript.split import TITLE_PAGE_WORD_LIMIT, note_numbers, split_text, without_matter

_BLOCKS = {"p", "div", "li", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "pre", "section"}


class _Text(HTMLParser):
    """An XHTML item's paragraphs and its first heading."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self.current: list[str] = []
        self.title: str | None = None
        self._heading: list[str] | None = None
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "head"):
            self._skip += 1
        if tag == "br":
            self.current.append("\n")
        if tag in _BLOCKS:
            self._flush()
        if tag in ("h1", "h2", "h3") and self.title is None and not self.blocks:
            self._heading = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "head"):
            self._skip = max(0, self._skip - 1)
        if tag in ("h1", "h2", "h3") and self._heading is not None:
            self.title = " ".join("".join(self._heading).split())
            self._heading = None
            self.current = []
            return
        if tag in _BLOCKS:
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        (self._heading if self._heading is not None else self.current).append(data)

    def _flush(self) -> None:
        lines = ("".join(self.current)).split("\n")  # a <br> keeps its line break (verse)
        text = "\n".join(kept for line in lines if (kept := " ".join(line.split())))
        if text and self._heading is None:
            self.blocks.append(text)
        if self._heading is None:
            self.current = []


def read_epub(path: Path, *, split: str | None = None) -> Manuscript:
    """The book's chapters (``split``: the items' text joined, then split as plain text)."""
    book = _open(path)
    if not book.spine:
        raise InputError(f"{path} has no spine (no reading order); it cannot be imported as a book")
    items = _spine_items(book, path)
    title, author = _meta(book, "title"), _meta(book, "creator")
    if split is not None:
        joined = "\n\n".join("\n\n".join(([t] if t else []) + blocks) for t, blocks in items)
        return split_text(joined, fmt="docx", pattern=split, name=str(path))
    pieces, notes, left = _pieces(items)
    pieces, dropped = without_matter(pieces, notes)
    pieces = [p for p in pieces if p.words or p.title]
    if not pieces:
        raise InputError(f"{path} has no chapters with text")
    note_numbers(pieces, notes)
    return Manuscript(
        pieces,
        notes,
        "epub",
        None,
        title,
        author,
        found_in="the EPUB's metadata" if title or author else None,
        left_out=left + dropped,
    )


def _open(path: Path):
    try:
        from ebooklib import epub
    except ImportError:
        raise InputError("reading EPUB needs ebooklib: pip install -e '.[manuscript]' in the fabula checkout") from None
    checked_size(path)
    members(path, "EPUB")  # every inflated size checked before ebooklib inflates one
    try:
        return epub.read_epub(str(path), options={"ignore_ncx": True})
    except (zipfile.BadZipFile, KeyError, ValueError, AttributeError, IndexError) as exc:
        raise InputError(f"{path} is not a readable EPUB ({type(exc).__name__}: {str(exc)[:80]})") from None
    except Exception as exc:  # ebooklib raises its own EpubException and lxml's errors
        if type(exc).__module__.startswith(("ebooklib", "lxml")):
            raise InputError(f"{path} is not a readable EPUB ({str(exc)[:80]})") from None
        raise


def _spine_items(book, path: Path) -> list[tuple[str | None, list[str]]]:
    """``(title, paragraphs)`` of each spine document, in reading order."""
    import ebooklib
    from ebooklib import epub

    out = []
    for entry in book.spine:
        item = book.get_item_with_id(entry[0] if isinstance(entry, tuple) else entry)
        properties = getattr(item, "properties", None) or []
        if (
            item is None
            or item.get_type() != ebooklib.ITEM_DOCUMENT
            or "nav" in properties
            or isinstance(item, epub.EpubNav)
        ):  # the EPUB's own navigation document is its contents list
            continue
        parser = _Text()
        parser.feed(item.get_content().decode("utf-8", "replace"))
        parser.close()
        parser._flush()
        out.append((parser.title, parser.blocks))
    if not out:
        raise InputError(f"{path}: its spine lists no text documents")
    return out


def _pieces(items: list[tuple[str | None, list[str]]]) -> tuple[list[Piece], list[str], list[Piece]]:
    """``(pieces, notes, left out)``: one piece per spine item, Gutenberg's parts and the items before
    the first chapter-titled one left out (and kept)."""
    notes: list[str] = []
    pieces: list[Piece] = []
    left: list[Piece] = []
    ended = False
    for title, blocks in items:
        text = "\n\n".join(blocks)
        if ended:
            continue
        if boilerplate.GUTENBERG_START.search(text) or boilerplate.GUTENBERG_END.search(text):
            text, said, _, gone = boilerplate.strip_gutenberg(text)
            notes += [n for n in said if n not in notes]
            left += gone
            ended = bool(boilerplate.GUTENBERG_END.search("\n\n".join(blocks)))
        pieces.append(Piece(title or "", text, _number(title)))
    story = next((i for i, p in enumerate(pieces) if p.number is not None or headings.SPECIAL.match(p.title)), 0)
    # before the first chapter: a title page or a contents item goes; a longer item may be story and stays
    titles = [p.title for p in pieces[story:]]
    kept = [
        p
        for p in pieces[:story]
        if p.words > TITLE_PAGE_WORD_LIMIT
        and not boilerplate.is_front_title(p.title)
        and not contents.lists(p.text.split("\n\n"), titles, [q.title for q in pieces])
    ]
    front = [p for p in pieces[:story] if p.words and p not in kept]
    if front:
        notes.append(
            f"left out front matter: {len(front)} spine item(s) before the first chapter "
            f"({sum(p.words for p in front)} words)"
        )
        left += [Piece(f"front matter: {p.title or 'untitled'}", p.text) for p in front]
    return kept + pieces[story:], notes, left


def _number(title: str | None) -> int | None:
    if not title:
        return None
    m = headings.CHAPTER.match(title) or headings.ROMAN.match(title) or headings.NUMERIC.match(title)
    return headings.number_of(m.group(1)) if m else None


def _meta(book, name: str) -> str | None:
    found = book.get_metadata("DC", name)
    return " ".join(str(found[0][0]).split()) if found and found[0] and found[0][0] else None
