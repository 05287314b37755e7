"""A run's story as an EPUB 3 book (EbookLib): title, author, a title page, one XHTML file per chapter
(headed by its planned title), a table of contents (nav and NCX) and the reading order.

The identifier is derived from the run's fingerprint and creation time, so exporting the same
run twice names the same book (a reader's library replaces it instead of adding a copy).
"""

from __future__ import annotations

import hashlib
import html
import os
import tempfile
from pathlib import Path

from agent.language import run_language_code
from agent.store.errors import StoreError
from agent.store.export.book import Book, Section, read_book
from agent.store.runstore import RunStore

_CSS = (
    "body { font-family: serif; line-height: 1.5; } h1 { text-align: center; } "
    "p { text-indent: 1.2em; margin: 0 0 0.4em 0; } p.degraded { color: #8a4b00; font-style: italic; } "
    "section.titlepage { text-align: center; margin-top: 30%; } section.titlepage p { text-indent: 0; } "
    "p.byline { font-size: 1.2em; margin-top: 1em; }"
)


def _ebooklib():
    try:
        from ebooklib import epub
    except ImportError as exc:  # an optional dependency: name the extra that brings it
        raise StoreError(
            "EPUB export needs EbookLib: run scripts/setup, or pip install -e '.[view]' in the fabula checkout"
        ) from exc
    return epub


def chapter_xhtml(section: Section) -> str:
    """The body of one chapter file: its heading, a degraded note if any, and its paragraphs."""
    parts = [f"<h1>{html.escape(section.heading)}</h1>"]
    if section.degraded:
        parts.append(
            f'<p class="degraded">(degraded chapter: {html.escape(section.degraded_reason or "no reason")})</p>'
        )
    parts += [f"<p>{html.escape(p).replace(chr(10), '<br/>')}</p>" for p in section.paragraphs]
    return "\n".join(parts)


def title_xhtml(book: Book) -> str:
    """The title page: the title, the author and, for a sequel, its place in the series."""
    parts = [
        '<section class="titlepage">',
        f"<h1>{html.escape(book.title)}</h1>",
        f'<p class="byline">{html.escape(book.author)}</p>',
    ]
    if book.series is not None:
        parts.append(f'<p class="series">Book {book.series[1]} of {html.escape(book.series[0])}</p>')
    return "\n".join([*parts, "</section>"])


def identifier(store: RunStore) -> str:
    info = store.info()
    digest = hashlib.sha256(f"{info.fingerprint}|{info.created_at!r}".encode()).hexdigest()[:32]
    return f"urn:fabula:{digest}"


def build(book: Book, ident: str, language: str = "en"):
    """The ``epub.EpubBook`` of ``book`` (not yet written)."""
    epub = _ebooklib()
    out = epub.EpubBook()
    out.set_identifier(ident)
    out.set_title(book.title)
    out.set_language(language)
    out.add_author(book.author)
    out.add_metadata("DC", "publisher", "fabula")
    if book.series is not None:  # EPUB 3 collection metadata: the series and the book's place in it
        name, index = book.series
        out.add_metadata(None, "meta", name, {"property": "belongs-to-collection", "id": "series"})
        out.add_metadata(None, "meta", "series", {"refines": "#series", "property": "collection-type"})
        out.add_metadata(None, "meta", str(index), {"refines": "#series", "property": "group-position"})
    style = epub.EpubItem(uid="style", file_name="style.css", media_type="text/css", content=_CSS.encode())
    out.add_item(style)
    title_page = epub.EpubHtml(uid="titlepage", title="Title page", file_name="title.xhtml", lang=language)
    title_page.content = title_xhtml(book)
    title_page.add_item(style)
    out.add_item(title_page)
    files = []
    for number, section in enumerate(book.sections, start=1):
        item = epub.EpubHtml(title=section.heading, file_name=f"chapter_{number:03d}.xhtml", lang=language)
        item.content = chapter_xhtml(section)
        item.add_item(style)
        out.add_item(item)
        files.append(item)
    out.toc = [
        epub.Link(title_page.file_name, title_page.title, "title"),
        *(epub.Link(f.file_name, f.title, f"ch{n}") for n, f in enumerate(files, start=1)),
    ]
    out.add_item(epub.EpubNcx())
    out.add_item(epub.EpubNav())
    out.spine = [title_page, "nav", *files]
    return out


def export_epub(store: RunStore) -> bytes:
    """The EPUB file's bytes."""
    language = run_language_code(store.info().config)
    book = read_book(store)
    if not book.sections:
        raise StoreError(f"{store.run_dir} has no committed text yet")
    built = build(book, identifier(store), language)
    epub = _ebooklib()
    fd, tmp = tempfile.mkstemp(suffix=".epub")
    os.close(fd)
    try:
        epub.write_epub(tmp, built, {})
        return Path(tmp).read_bytes()
    finally:
        Path(tmp).unlink(missing_ok=True)
