"""The real novel the tests import (Moby-Dick, Project Gutenberg #2701, gzip) and books built from it."""

from __future__ import annotations

import gzip
import re
from functools import cache
from pathlib import Path

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "books" / "moby-dick-pg2701.txt.gz"
HEADING = re.compile(r"^(CHAPTER \d+\.|Epilogue$)")
"""The book's own heading lines, as a reader sees them (separate from fabula's rules)."""


@cache
def moby_dick() -> str:
    return gzip.decompress(FIXTURE.read_bytes()).decode("utf-8")


def chapters_by_hand(text: str) -> list[tuple[str, list[str]]]:
    """``(heading, lines)`` of each chapter: headings after the contents list (whose entries are
    one per paragraph with nothing between), up to the END marker."""
    lines = text.replace("\r\n", "\n").split("\n")
    end = next(i for i, line in enumerate(lines) if line.startswith("*** END OF THE PROJECT GUTENBERG"))
    marks = [i for i, line in enumerate(lines[:end]) if HEADING.match(line)]
    body = [i for n, i in enumerate(marks) if n + 1 == len(marks) or marks[n + 1] - i > 4]  # not a contents entry
    first = next(i for i in body if lines[i].startswith("CHAPTER 1."))
    body = [i for i in body if i >= first]
    return [(lines[i], lines[i + 1 : j]) for i, j in zip(body, [*body[1:], end], strict=True)]
