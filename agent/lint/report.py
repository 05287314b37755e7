"""Lint a book: every chapter through the phrase rules and the habit measures, scored per 1,000 words.

A chapter's score is its flags per 1,000 words (lower is better; 0 is clean); the book's is the same over
all its words. Each flag quotes its passage (the sentence or sentences it lies in) so the writer, or
``lint --fix``, can go straight to it.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.lint import habits
from agent.lint.rules import LintRules, load_rules
from agent.text import count_words, sentence_spans

PASSAGE_CHARS = 320
"""A quoted passage is cut to this many characters (a flag on a run of sentences can be long)."""
FAMILIES = ("stock", "repetition", "openings", "tags")
MACHINE_FAMILIES = ("stock", "tags")
"""The families that are habits of machine prose itself (a human novel should raise almost none)."""


@dataclass(frozen=True)
class Flag:
    """One flagged passage: chapter (1-based), rule and family, offsets into the chapter, the passage."""

    chapter: int
    rule: str
    family: str
    start: int
    end: int
    passage: str
    detail: str


@dataclass
class ChapterReport:
    index: int
    title: str
    words: int
    flags: list[Flag] = field(default_factory=list)
    overused: list[tuple[str, str, int, float]] = field(default_factory=list)
    """``(kind, word, count, ratio)``: listed for the writer, not flagged (see ``habits.overused_words``)."""

    @property
    def score(self) -> float:
        """Flags per 1,000 words (0: clean)."""
        return round(len(self.flags) * 1000 / self.words, 2) if self.words else 0.0

    def by_family(self) -> dict[str, int]:
        counts = Counter(f.family for f in self.flags)
        return {family: counts.get(family, 0) for family in FAMILIES}


@dataclass
class BookReport:
    chapters: list[ChapterReport]

    @property
    def words(self) -> int:
        return sum(c.words for c in self.chapters)

    @property
    def flags(self) -> list[Flag]:
        return [f for c in self.chapters for f in c.flags]

    @property
    def score(self) -> float:
        return round(len(self.flags) * 1000 / self.words, 2) if self.words else 0.0

    def per_thousand(self, families: tuple[str, ...]) -> float:
        """Flags of ``families`` per 1,000 words of the book."""
        n = sum(1 for f in self.flags if f.family in families)
        return round(n * 1000 / self.words, 3) if self.words else 0.0

    def by_rule(self) -> list[tuple[str, int]]:
        return Counter(f.rule for f in self.flags).most_common()

    def worst_offenders(self, limit: int = 8) -> list[str]:
        """The book's most frequent stock phrases and overused words, as the writer's prompt may avoid them."""
        phrases = Counter(f.detail.lower() for f in self.flags if f.family == "stock").most_common(limit)
        words = Counter(w for c in self.chapters for kind, w, _, _ in c.overused[:3] if kind == "word")
        out = [p for p, _ in phrases] + [w for w, n in words.most_common() if n > 1]
        return out[:limit]

    def to_dict(self) -> dict[str, Any]:
        return {
            "words": self.words,
            "flags": len(self.flags),
            "score": self.score,
            "machine_flags_per_1000": self.per_thousand(MACHINE_FAMILIES),
            "by_rule": dict(self.by_rule()),
            "chapters": [
                {
                    "index": c.index,
                    "title": c.title,
                    "words": c.words,
                    "score": c.score,
                    "by_family": c.by_family(),
                    "overused": [{"kind": k, "word": w, "count": n, "ratio": r} for k, w, n, r in c.overused],
                    "flags": [asdict(f) for f in c.flags],
                }
                for c in self.chapters
            ],
        }


def passage_span(spans: list[tuple[int, int]], starts: list[int], start: int, end: int) -> tuple[int, int]:
    """``(lo, hi)``: the sentences (``spans``, their ``starts``) that ``[start, end)`` touches."""
    first = max(0, bisect.bisect_right(starts, start) - 1)
    last = max(first, bisect.bisect_left(starts, end) - 1)
    lo, hi = (spans[first][0], spans[last][1]) if spans else (start, end)
    return min(lo, start), max(hi, end)


def _passage(text: str, spans: list[tuple[int, int]], starts: list[int], start: int, end: int) -> str:
    """The sentences of ``text`` that ``[start, end)`` touches, cut to ``PASSAGE_CHARS``."""
    lo, hi = passage_span(spans, starts, start, end)
    quoted = " ".join(text[lo:hi].split())
    return quoted if len(quoted) <= PASSAGE_CHARS else quoted[: PASSAGE_CHARS - 1] + "…"


def lint_chapter_texts(texts: list[tuple[str, str]], rules: LintRules) -> BookReport:
    """Lint ``(title, text)`` chapters in order; the repeated-phrase measure looks across all of them."""
    repeats = habits.repeated_phrases([t for _, t in texts])
    chapters = []
    for index, ((title, text), repeated) in enumerate(zip(texts, repeats, strict=True), start=1):
        spans = sentence_spans(text)
        starts = [s for s, _ in spans]
        hits = (
            habits.stock_phrases(text, rules)
            + repeated
            + habits.monotonous_openings(text, spans)
            + habits.tag_habits(text, rules)
        )
        hits.sort(key=lambda h: (h.start, h.rule))
        flags = [
            Flag(index, h.rule, h.family, h.start, h.end, _passage(text, spans, starts, h.start, h.end), h.detail)
            for h in hits
        ]
        chapters.append(ChapterReport(index, title, count_words(text), flags, habits.overused_words(text)[:10]))
    return BookReport(chapters)


def lint_book(texts: list[tuple[str, str]], rules: LintRules | None = None) -> BookReport:
    """:func:`lint_chapter_texts` under the default rules unless ``rules`` are given."""
    return lint_chapter_texts(texts, rules or load_rules())
