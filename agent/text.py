"""Word counting and sentence splitting: one rule for every method.

Every pipeline, baseline, length gate and report counts words here, so that a chapter that
passes the gate in one method has the same length in every other (NstAgent A.1: "one word
per contiguous ASCII word or per CJK character").

The rule is deliberately the paper's, not a linguistic one: a letter outside ASCII splits a
Latin word ("naïve" counts as two), and every CJK character (Han, kana, Hangul syllable)
counts as one word.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from typing import Any

CJK_CLASS = (
    "\u3040-\u3096"  # hiragana
    "\u30a1-\u30fa\u30fc-\u30ff"  # katakana (not the middle dot U+30FB, which is punctuation)
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0002ebef"  # extensions B-F
    "\U00030000-\U0003134f"  # extension G
)
CJK_CHAR = re.compile(f"[{CJK_CLASS}]")
"""One CJK character: each counts as one word."""

LATIN_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_-]*")
"""One Latin word: an ASCII letter or digit followed by letters, digits, ', _ or -."""

_CLOSERS = "\"'”’»」』】）)\\]"
_LATIN_END = re.compile(rf"(?:[.!?]+|…+)[{_CLOSERS}]*(?=\s|$)")
_CJK_END = re.compile(rf"[。！？!?…]*[。！？][{_CLOSERS}]*")
_NEWLINES = re.compile(r"\n\s*")
_ABBREVIATIONS = frozenset(
    {
        "mr",
        "mrs",
        "ms",
        "dr",
        "st",
        "jr",
        "sr",
        "prof",
        "mt",
        "ft",
        "gen",
        "col",
        "capt",
        "lt",
        "sgt",
        "rev",
        "hon",
        "vs",
        "etc",
        "e.g",
        "i.e",
        "no",
        "vol",
        "fig",
    }
)
_LAST_TOKEN = re.compile(r"([A-Za-z.]+)\.$")


def count_words(text: str) -> int:
    """Words in ``text`` under the shared rule: each CJK character plus each Latin word."""
    return len(CJK_CHAR.findall(text)) + len(LATIN_WORD.findall(text))


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of each sentence in ``text``, outer whitespace excluded.

    Offsets (rather than strings) let a search window quote the chapter exactly. A sentence
    ends at a line break, at CJK terminal punctuation, or at Latin terminal punctuation that
    is followed by whitespace and not by a lower-case word ("Stop!" she cried. stays one
    sentence), and not after a common abbreviation or an initial ("Mr.", "J.").
    """
    ends: set[int] = set()
    for match in _NEWLINES.finditer(text):
        ends.add(match.start())
    for match in _CJK_END.finditer(text):
        ends.add(match.end())
    for match in _LATIN_END.finditer(text):
        if _continues_sentence(text, match.start(), match.end()):
            continue
        ends.add(match.end())
    spans: list[tuple[int, int]] = []
    start = 0
    for end in [*sorted(ends), len(text)]:
        if end <= start:
            continue
        piece = text[start:end]
        stripped = piece.strip()
        if stripped:
            left = start + (len(piece) - len(piece.lstrip()))
            spans.append((left, left + len(stripped)))
        start = end
    return spans


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (see :func:`sentence_spans`)."""
    return [text[a:b] for a, b in sentence_spans(text)]


def close_point(text: str, words: int) -> int | None:
    """Where a passage asked for ``words`` words ends: the end offset of its first sentence that
    ends once the passage holds that many words and that another sentence follows (so the end is
    certain while the passage is still being written: ``"Stop!" she`` is not one); ``None`` while
    there is none. Why: a small model writes on past its length to its token ceiling; this is the
    one rule that cuts it (at decode time in the in-process engines)."""
    spans = sentence_spans(text)
    held = 0
    for start, end in spans[:-1]:  # the last has no sentence after it yet
        held += count_words(text[start:end])
        if held >= words:
            return end
    return None


def _continues_sentence(text: str, punct_start: int, punct_end: int) -> bool:
    following = text[punct_end:].lstrip()
    if following[:1].islower():
        return True
    if text[punct_start] != "." or text[punct_start:punct_end].startswith(".."):
        return False
    before = _LAST_TOKEN.search(text[max(0, punct_start - 12) : punct_start + 1])
    if before is None:
        return False
    token = before.group(1).lower()
    return token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha())


def without_nul(text: str) -> str:
    """``text`` with NUL characters replaced by U+FFFD: SQLite's text functions stop at a NUL, so
    a NUL in a model's reply would cut search windows short. One character for one, so every
    offset into the text stays valid."""
    return text.replace("\x00", "\ufffd")


class InputTooLargeError(OSError):
    """A user's input file is larger than fabula reads (``/dev/zero``, a wrong file)."""


def _read_up_to(handle: Any, count: int) -> bytes:
    """At most ``count`` bytes, read a block at a time: ``read(count)`` would allocate ``count`` bytes
    at once however short the file (100 MiB for a 1 KiB manuscript)."""
    blocks: list[bytes] = []
    left = count
    while left > 0:
        block = handle.read(min(left, 1 << 20))
        if not block:
            break
        blocks.append(block)
        left -= len(block)
    return b"".join(blocks)


def read_capped(path: str | os.PathLike[str], limit: int) -> bytes:
    """At most ``limit`` bytes of a file; a longer one (or an endless device) raises
    :class:`InputTooLargeError` instead of filling memory."""
    # opened without blocking: a FIFO nobody writes to would block open() forever; once open, a
    # pipe with a writer is read normally and one without reads as empty (EOF)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
        if stat.S_ISSOCK(mode):
            raise OSError(errno.EINVAL, "is a socket, not a file", str(path))
        os.set_blocking(fd, True)
        data = _read_up_to(handle, limit + 1)
    if len(data) > limit:
        raise InputTooLargeError(f"larger than {limit // (1 << 20)} MiB; fabula reads at most that")
    return data
