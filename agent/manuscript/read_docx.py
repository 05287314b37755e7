"""DOCX manuscripts (python-docx, the ``manuscript`` extra): heading styles become ``#`` headings."""

from __future__ import annotations

import zipfile
from pathlib import Path

from agent.errors import InputError
from agent.manuscript.archive import members
from agent.manuscript.read_text import read_bytes

CORE_PROPERTIES = "docProps/core.xml"
"""Where a DOCX keeps its title and author (absent in some files)."""
_LEVELS = {"title": 1, "heading 1": 1, "heading 2": 2, "heading 3": 3}


def read_docx(path: Path) -> tuple[str, str | None, str | None]:
    """``(text, title, author)``: paragraphs separated by blank lines, headings as Markdown."""
    try:
        import docx
    except ImportError:
        raise InputError(
            "reading DOCX needs python-docx: pip install -e '.[manuscript]' in the fabula checkout"
        ) from None
    import io

    data = read_bytes(path)
    names = members(path, "DOCX file")  # every inflated size checked before python-docx inflates one
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
    if CORE_PROPERTIES not in names:  # python-docx makes up a default part, titled "Word Document"
        return "\n\n".join(out) + "\n", None, None
    props = document.core_properties
    return "\n\n".join(out) + "\n", props.title or None, props.author or None
