"""Chapter headings a book may use, and the chapter number each one gives.

Styles, tried in this order, the first one found being the book's: Markdown ``#`` headings (the
level of ``## Chapter 3``-like ones, else the shallowest level used more than once), ``Chapter
12`` / ``CHAPTER XII. Title.`` / ``Chapter Twelve``, a line holding only a roman numeral (``XII.``
or ``XII. Title``), a line holding only a number. ``Letter 4`` stands with ``Chapter 4`` (Frankenstein
opens with four letters). ``Prologue`` and ``Epilogue`` stand with the word
and numeral styles. A heading line must begin a paragraph and be short, so prose that mentions
"chapter 3" never splits a book.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_UNITS = [
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_WORD_NUMBER = rf"(?:(?:{'|'.join(_TENS)})(?:[- ](?:{'|'.join(_UNITS[:9])}))?|{'|'.join(reversed(_UNITS))})"
_ROMAN = r"[IVXLCDM]+"
MAX_HEADING = 100
"""Longest heading line, in characters."""

MAX_HEADING_LINE = 4 * MAX_HEADING
"""Longest line even looked at as a possible heading: every pattern below runs on short lines only."""
MARKDOWN = re.compile(r"^(#{1,6})[ \t]+(\S.*)$")
"""``## Title ##``: the closing hashes and blanks are stripped in code (a lazy group before optional
trailing blanks backtracks quadratically on a long run of blanks)."""
NUMBER = rf"\d{{1,4}}|{_ROMAN}|{_WORD_NUMBER}"
"""A heading's number: digits, a roman numeral or English words."""
CHAPTER = re.compile(rf"^(?:chapter|chap\.|letter)[ \t]+({NUMBER})\b\.?(?:[ \t]*[.:—–-]?[ \t]*(.*))?$", re.I)
"""``Chapter 12``, ``CHAPTER XII. Title.``, ``Chapter Twelve``; ``Letter 4`` too (a novel in letters)."""
ROMAN = re.compile(rf"^({_ROMAN})(?:\.(?:[ \t]+(\S.{{0,60}}))?)?$")
"""``XII``, ``XII.`` or ``XII. Title``: never ``I waited.``, a first-person paragraph of its own."""
NUMERIC = re.compile(r"^(\d{1,4})\.?$")
SPECIAL = re.compile(r"^(prologue|epilogue)\b\.?(?:[ \t]*[.:—–-]?[ \t]*(.*))?$", re.I)
_ROMAN_VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


@dataclass(frozen=True)
class Heading:
    """A heading line: where it is, what it says, the number it gives (None: none, e.g. an epilogue)."""

    line: int
    title: str
    number: int | None
    level: int = 0


def roman(text: str) -> int | None:
    """The value of a well-formed roman numeral (``XIV`` -> 14); None for ``IIII``, ``VX``, ``MIM``..."""
    text = text.upper()
    if not text or any(c not in _ROMAN_VALUES for c in text):
        return None
    total = 0
    for i, c in enumerate(text):
        value = _ROMAN_VALUES[c]
        total += -value if i + 1 < len(text) and _ROMAN_VALUES[text[i + 1]] > value else value
    return total if _to_roman(total) == text else None


def _to_roman(n: int) -> str:
    out = ""
    for value, letters in (
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ):
        while n >= value:
            out, n = out + letters, n - value
    return out


def number_of(token: str) -> int | None:
    """A heading's number: digits, a roman numeral or English words (``twenty-one``)."""
    if token.isdigit():
        return int(token)
    word = token.lower().replace(" ", "-")
    if word in _UNITS:
        return _UNITS.index(word) + 1
    tens, _, unit = word.partition("-")
    if tens in _TENS and (not unit or unit in _UNITS[:9]):
        return 20 + 10 * _TENS.index(tens) + (_UNITS.index(unit) + 1 if unit else 0)
    return roman(token)


def find(lines: list[str]) -> list[Heading]:
    """The chapter headings of ``lines`` in the book's own style (empty: the book has none)."""
    markdown = _markdown(lines)
    if markdown:
        return markdown
    for style in (CHAPTER, ROMAN, NUMERIC):
        found = [h for i in range(len(lines)) if (h := _match(style, lines, i)) is not None]
        if len(found) >= (1 if style is CHAPTER else 2):
            specials = [h for i in range(len(lines)) if (h := _match(SPECIAL, lines, i)) is not None]
            return sorted(found + specials, key=lambda h: h.line)
    return []


def by_pattern(lines: list[str], matches: Callable[[str], bool]) -> list[Heading]:
    """``--split REGEX``: every line ``matches`` (the user's pattern, time-limited by the caller)
    starts a chapter (its title, if it has words)."""
    out = []
    for i, line in enumerate(lines):
        if matches(line):
            title = line.strip() if re.search(r"\w", line) else ""
            out.append(Heading(i, title[:MAX_HEADING], None))
    return out


def _markdown(lines: list[str]) -> list[Heading]:
    found: list[Heading] = []
    fenced = False
    for i, line in enumerate(lines):
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        m = None if fenced or len(line) > MAX_HEADING_LINE else MARKDOWN.match(line)
        if m:
            title = m.group(2).rstrip().rstrip("#").strip() or m.group(2).strip()
            inner = CHAPTER.match(title) or SPECIAL.match(title)
            number = number_of(inner.group(1)) if inner and inner.re is CHAPTER else None
            found.append(Heading(i, title, number, len(m.group(1))))
    if not found:
        return []
    levels = sorted({h.level for h in found})
    numbered = [lv for lv in levels if any(h.level == lv and h.number is not None for h in found)]
    level = numbered[0] if numbered else next((lv for lv in levels if sum(h.level == lv for h in found) > 1), levels[0])
    return [h for h in found if h.level == level]


def _match(style: re.Pattern[str], lines: list[str], i: int) -> Heading | None:
    line = lines[i].strip()
    if not line or len(line) > MAX_HEADING or (i > 0 and lines[i - 1].strip()):
        return None
    m = style.match(line)
    if m is None:
        return None
    if style is not CHAPTER and not _alone(lines, i):
        return None
    if style is SPECIAL:
        return Heading(i, line, None)
    number = number_of(m.group(1))
    if number is None:
        return None
    return Heading(i, line, number)


def _alone(lines: list[str], i: int) -> bool:
    """The line is a paragraph of its own (a bare numeral inside prose is not a heading)."""
    return i + 1 >= len(lines) or not lines[i + 1].strip()
