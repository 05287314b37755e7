"""The three rules every door applies to what a user types or hands over: a whole number, a label
(a title, a name, a line printed on a terminal) and a file or stream read with a cap.

Each rule is written once here so that a door added later cannot forget half of it (``"²".isdigit()``
is true, ``int()`` of 5,000 digits raises, a FIFO blocks ``open()``, a title can hold an escape
sequence that clears the screen).
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from typing import Any

from agent.errors import InputError
from agent.text import InputTooLargeError, read_capped

MAX_DIGITS = 19
"""The most digits a number typed by a user may have (2**63 has 19): longer is refused before ``int()``."""
SEED_MAX = 2**63 - 1
"""The largest sampling seed passed to a server (a signed 64-bit integer on every backend)."""
_DIGITS = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}")
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)?|[@-Z\\-_])")
MAX_TITLE = 200
"""The longest title or name, in characters (a chapter's, a book's, a character's)."""
MAX_DESCRIPTION = 20_000
"""The longest chapter description of an edited outline, in characters (a summary is a few hundred words)."""
MAX_NESTING = 64
"""The deepest JSON/TOML nesting a user's file may have; deeper is refused before a parser recurses."""


def whole_number(text: object, *, low: int, high: int, what: str) -> int:
    """``text`` as an integer in ``[low, high]``: ASCII decimal digits only (a leading ``-`` when
    ``low`` is negative), at most :data:`MAX_DIGITS` of them, the range checked before any use.

    Raises :class:`InputError` naming ``what`` (one line)."""
    raw = str(text).strip()
    shown = raw if len(raw) <= 40 else raw[:37] + "..."
    negative = raw.startswith("-") and low < 0
    digits = raw[1:] if negative else raw
    if _DIGITS.fullmatch(digits) is None:
        raise InputError(f"{what} must be a whole number from {low} to {high}, got {shown!r}")
    value = -int(digits) if negative else int(digits)
    if not low <= value <= high:
        raise InputError(f"{what} must be from {low} to {high}, got {shown}")
    return value


def number_or_none(text: object, *, low: int, high: int) -> int | None:
    """:func:`whole_number`, or None where a malformed number is ignored (a web page's query string)."""
    try:
        return whole_number(text, low=low, high=high, what="n")
    except InputError:
        return None


def printable(text: str) -> str:
    """One terminal line of ``text``: escape sequences and control characters removed, line breaks
    and tabs made spaces, every other character (alignment blanks too) kept."""
    text = _ESCAPE.sub("", text)
    return "".join(
        " " if ch in "\t\n\r\x0b\x0c\u2028\u2029\x85" else ch
        for ch in text
        if ch in "\t\n\r\x0b\x0c\u2028\u2029\x85"
        or unicodedata.category(ch) not in ("Cc", "Cf")
        or ch in "\u200d\u200c"
    )


def clean_label(text: str) -> str:
    """``text`` fit to print on a terminal or show as a title: escape sequences and control characters
    (DEL and the C1 range included) removed, line breaks and tabs made spaces, runs of blanks one
    space. Says nothing about length (:func:`checked_label` does)."""
    return " ".join(printable(text).split())


def checked_label(text: str, *, what: str, limit: int = MAX_TITLE, empty_ok: bool = False) -> str:
    """:func:`clean_label` of ``text``, refused (one line naming ``what``) when over ``limit``
    characters or, unless ``empty_ok``, empty."""
    if len(text) > limit * 4:  # a megabyte title is refused before it is cleaned
        raise InputError(f"{what} is {len(text):,} characters; at most {limit:,}")
    label = clean_label(text)
    if len(label) > limit:
        raise InputError(f"{what} is {len(label):,} characters; at most {limit:,}")
    if not label and not empty_ok:
        raise InputError(f"{what} is empty")
    return label


def checked_text(text: str, *, what: str, limit: int) -> str:
    """Multi-line text (a description) with its control characters and escape sequences removed,
    line breaks kept; refused when over ``limit`` characters."""
    if len(text) > limit:
        raise InputError(f"{what} is {len(text):,} characters; at most {limit:,}")
    return "\n".join(clean_label(line) if line.strip() else "" for line in text.split("\n")).strip()


def read_user_file(path: str, *, limit: int, what: str = "--file") -> str:
    """The UTF-8 text of ``path`` (``-``: standard input), at most ``limit`` bytes: a FIFO nobody
    writes to does not block, ``/dev/zero`` is refused at the cap, a folder or socket in one line."""
    try:
        if path == "-":
            stdin = getattr(sys.stdin, "buffer", None)
            data = stdin.read(limit + 1) if stdin else sys.stdin.read(limit + 1).encode("utf-8")
        else:
            data = read_capped(path, limit)
        if len(data) > limit:
            raise InputTooLargeError(f"larger than {limit >> 20} MiB; fabula reads at most that")
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"cannot read {what} {path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def nesting_depth(text: str, *, limit: int = MAX_NESTING) -> int:
    """How deep brackets nest in ``text`` (JSON arrays/objects, TOML inline tables/arrays), counted
    without a parser so a hostile file cannot make one recurse; stops counting past ``limit``.
    Brackets inside strings are counted too, which only ever over-counts."""
    depth = deepest = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        elif ch in "]}":
            depth = max(0, depth - 1)
    return deepest


def loads_json(text: str, *, what: str) -> Any:
    """``json.loads`` of a user's file, refused in one line when nested deeper than :data:`MAX_NESTING`
    (the parser would recurse past Python's limit) or malformed."""
    if nesting_depth(text) > MAX_NESTING:
        raise InputError(f"{what} nests deeper than {MAX_NESTING} levels")
    try:
        return json.loads(text)
    except RecursionError:
        raise InputError(f"{what} nests deeper than {MAX_NESTING} levels") from None


def within_nesting(text: str, *, what: str) -> str:
    """``text`` unchanged, or refused when nested deeper than :data:`MAX_NESTING` (before a TOML parser)."""
    if nesting_depth(text) > MAX_NESTING:
        raise InputError(f"{what} nests deeper than {MAX_NESTING} levels")
    return text


__all__ = [
    "MAX_DESCRIPTION",
    "MAX_DIGITS",
    "MAX_NESTING",
    "MAX_TITLE",
    "SEED_MAX",
    "checked_label",
    "checked_text",
    "clean_label",
    "loads_json",
    "nesting_depth",
    "number_or_none",
    "printable",
    "read_user_file",
    "whole_number",
    "within_nesting",
]
