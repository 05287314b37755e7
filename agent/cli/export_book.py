"""The book formats of ``fabula export``: one self-contained HTML file, and EPUB."""

from __future__ import annotations

from agent.store.runstore import RunStore

BOOK_FORMATS = ("html", "epub")


def book_bytes(store: RunStore, fmt: str) -> bytes:
    """The exported file's bytes (the HTML holds story, state timeline and costs)."""
    if fmt == "epub":
        from agent.store.export_epub import export_epub

        return export_epub(store)
    if fmt == "html":
        from agent.view.html_export import export_html

        return export_html(store).encode("utf-8")
    raise ValueError(f"unknown book format {fmt!r}; use one of {', '.join(BOOK_FORMATS)}")
