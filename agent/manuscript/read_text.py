"""Reading a manuscript file safely: refused before it is read whole when it cannot be a book.

A file over :data:`MAX_BYTES`, a folder or a device, an empty file and a binary one are refused in
one line; text that is not UTF-8 is read as Windows-1252 when it decodes as that (most old
manuscripts and many Project Gutenberg copies are), and refused otherwise, never guessed.
"""

from __future__ import annotations

import codecs
import stat
from pathlib import Path

from agent.errors import InputError
from agent.text import InputTooLargeError, read_capped

MAX_BYTES = 100 * 1024 * 1024
"""The largest file read: the longest novels are a few MB of text, an illustrated EPUB tens of MB."""
SNIFF_BYTES = 8192
_CONTROL = {c for c in range(32) if c not in (9, 10, 12, 13)}
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def checked_size(path: Path) -> int:
    """The file's size from ``stat`` (so a huge file is refused before a byte of it is read)."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(f"{path} is a folder; give the manuscript file")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{path} is not a regular file")
    if info.st_size == 0:
        raise InputError(f"{path} is empty; there is nothing to import")
    if info.st_size > MAX_BYTES:
        raise InputError(
            f"{path} is {info.st_size / 2**20:.0f} MiB; fabula imports files up to "
            f"{MAX_BYTES // 2**20} MiB (is it really one book?)"
        )
    return info.st_size


def read_bytes(path: Path) -> bytes:
    """The whole file, after :func:`checked_size`."""
    checked_size(path)
    try:
        return read_capped(path, MAX_BYTES)  # read a block at a time, never a 100 MiB buffer up front
    except InputTooLargeError as exc:
        raise InputError(f"{path}: {exc}") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def decode(data: bytes, path: Path) -> tuple[str, str]:
    """``(text, encoding)``: UTF-8 (or UTF-16 with its mark), else Windows-1252, else refused."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return _normal(data.decode(encoding)), encoding.removesuffix("-sig")
            except UnicodeDecodeError:
                raise InputError(f"{path} starts with a {encoding} mark but is not {encoding} text") from None
    if looks_binary(data):
        raise InputError(f"{path} looks like a binary file, not text (give a .txt, .md, .epub or .docx file)")
    try:
        return _normal(data.decode("utf-8")), "utf-8"
    except UnicodeDecodeError as exc:
        where = exc.start
    try:
        text = data.decode("cp1252")
    except UnicodeDecodeError:
        raise InputError(
            f"{path} is not UTF-8 text (byte {where}) nor Windows-1252; convert it to UTF-8 first, "
            "e.g. iconv -f ENCODING -t UTF-8"
        ) from None
    return _normal(text), "cp1252"


def looks_binary(data: bytes) -> bool:
    """NUL or many control bytes in the first block: an image, an archive, a word-processor file."""
    head = data[:SNIFF_BYTES]
    if b"\x00" in head:
        return True
    controls = sum(1 for b in head if b in _CONTROL)
    return controls > max(8, len(head) // 100)


def read_text(path: Path) -> tuple[str, str]:
    """``(text, encoding)`` of a plain-text or Markdown manuscript."""
    data = read_bytes(path)
    if data[:4] == b"PK\x03\x04":
        raise InputError(f"{path} is a ZIP archive; an EPUB or DOCX must be named .epub or .docx")
    if data[:5] == b"%PDF-":
        raise InputError(f"{path} is a PDF; fabula imports text, Markdown, EPUB and DOCX (save it as one of those)")
    text, encoding = decode(data, path)
    if not text.strip():
        raise InputError(f"{path} holds only white space; there is nothing to import")
    return text, encoding


def _normal(text: str) -> str:
    """One newline convention, no byte-order mark."""
    return text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


__all__ = ["MAX_BYTES", "checked_size", "decode", "looks_binary", "read_bytes", "read_text"]
