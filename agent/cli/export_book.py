"""The book formats of ``fabula export``: one self-contained HTML file, EPUB and DOCX (manuscript format)."""

from __future__ import annotations

from agent.store.runstore import RunStore

BOOK_FORMATS = ("html", "epub", "docx")
BINARY_FORMATS = ("epub", "docx")


def book_bytes(store: RunStore, fmt: str, *, with_ledger: bool = False) -> bytes:
    """The exported file's bytes (the HTML: the book, and with ``with_ledger`` the state timeline and costs)."""
    if fmt == "epub":
        from agent.store.export.epub import export_epub

        return export_epub(store)
    if fmt == "docx":
        from agent.store.export.docx import export_docx

        return export_docx(store)
    if fmt == "html":
        from agent.view.html_export import export_html

        return export_html(store, with_ledger=with_ledger).encode("utf-8")
    raise ValueError(f"unknown book format {fmt!r}; use one of {', '.join(BOOK_FORMATS)}")
