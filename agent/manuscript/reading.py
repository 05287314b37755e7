"""One entry point from a file to a :class:`Manuscript`, by the file's kind."""

from __future__ import annotations

from pathlib import Path

from agent.errors import InputError
from agent.manuscript.model import Manuscript
from agent.manuscript.read_text import read_text
from agent.manuscript.split import split_text

FORMATS = ("auto", "text", "markdown", "epub", "docx")
_BY_SUFFIX = {".md": "markdown", ".markdown": "markdown", ".epub": "epub", ".docx": "docx"}


def format_of(path: Path, given: str = "auto") -> str:
    """The reader to use: ``given``, else the suffix (.md, .epub, .docx; anything else is text)."""
    if given != "auto":
        if given not in FORMATS:
            raise InputError(f"unknown format {given!r}; use one of {', '.join(FORMATS)}")
        return given
    return _BY_SUFFIX.get(path.suffix.lower(), "text")


def read_manuscript(path: Path, *, split: str | None = None, fmt: str = "auto", keep_front: bool = False) -> Manuscript:
    """Read and split ``path``; every problem with the file is an :class:`InputError` (one line).
    ``keep_front``: a plain-text or Markdown file's front and back matter and contents stay chapters."""
    kind = format_of(path, fmt)
    if kind == "epub":
        from agent.manuscript.read_epub import read_epub

        return read_epub(path, split=split)
    if kind == "docx":
        from agent.manuscript.read_docx import read_docx

        text, title, author = read_docx(path)
        found = split_text(text, fmt="docx", pattern=split, name=str(path), keep_front=keep_front)
        return _named(found, title, author)
    text, encoding = read_text(path)
    found = split_text(
        text,
        fmt="markdown" if kind == "markdown" else "text",
        pattern=split,
        name=str(path),
        encoding=encoding,
        keep_front=keep_front,
    )
    if encoding not in ("utf-8", "utf-16"):
        found.notes.insert(0, f"read {path.name} as {encoding} (it is not UTF-8)")
    return found


def _named(found: Manuscript, title: str | None, author: str | None) -> Manuscript:
    from dataclasses import replace

    if not (title or author):
        return found
    return replace(
        found, title=title or found.title, author=author or found.author, found_in="the document's properties"
    )
