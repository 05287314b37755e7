"""DOCX manuscripts (python-docx, the ``manuscript`` extra): heading styles become ``#`` headings."""

from __future__ import annotations

import zipfile
from pathlib import Path

from agent.errors import InputError
from agent.manuscript.read_text import read_bytes

_LEVELS = {"title": 1, "heading 1": 1, "heading 2": 2, "heading 3": 3}


def read_docx(path: Path) -> tuple[str, str | None, str | None]:
    """``(text, title, author)``: paragraphs separated by blank lines, headings as Markdown."""
    try:
        import docx
    except ImportError:
        raise InputError("reading DOCX needs python-docx: pip install -e '.[manuscript]' in the fabula "
                         "checkout") from None
    import io

    data = read_bytes(path)
    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise InputError(f"{path} is not a readable DOCX file ({type(exc).__name__})") from None
    out = []
    for paragraph in document.paragraphs:
        text = " ".join(paragraph.text.split())
        if not text:
            continue
        style = (paragraph.style.name if paragraph.style is not None else "").lower()
        level = _LEVELS.get(style)
        out.append(f"{'#' * (level + (style != 'title'))} {text}" if level else text)
    if not out:
        raise InputError(f"{path} has no text")
    props = document.core_properties
    return "\n\n".join(out) + "\n", props.title or None, props.author or None
