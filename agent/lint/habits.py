"""What no single phrase shows: repeats across chapters, monotonous openings, overused words, tag habits.

Each measure returns :class:`Hit` spans (offsets into the chapter's text) under a rule name, so the
report quotes the passage; every threshold is a named constant here, set so that the two human novels of
``scripts/lint_bench.py`` raise few of them (the figures are in docs/design/lint.md).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from agent.lint.rules import LintRules
from agent.text import CJK_CHAR

REFERENCE = Path(__file__).with_name("data") / "reference_en.tsv"

REPEAT_N = 6
"""A repeated phrase is this many words long (shorter ones are the language's own idioms)."""
REPEAT_N_CJK = 10
"""In a book written mostly in CJK characters, each character counts as a word (``agent.text``), and a
repeated phrase is this many characters long: six characters are often one idiom, ten are a clause."""
REPEAT_BASE, REPEAT_PER_WORDS = 3, 25_000
"""A phrase counts as repeated from ``BASE + book words // PER_WORDS`` uses on: a long book earns more."""
OPENING_RUN = 4
"""This many sentences in a row opening with the same word is monotony."""
OPENING_SHARE, OPENING_MIN_SENTENCES = 0.30, 30
"""One opening word (not 'the', 'and', a quotation) on this share of a chapter's sentences is monotony."""
OVERUSE_RATIO, OVERUSE_MIN = 12.0, 6
"""A word used this many times more often than the reference, and at least MIN times in the chapter."""
OVERUSE_FLOOR = 5.0
"""Per million: the reference rate of a word the reference does not list (rarer than its last word)."""
ELABORATE_MIN = 4
"""A chapter with at least this many elaborate tags, more than its plain ones, has a tag habit."""

_WORD = re.compile(r"[A-Za-z][A-Za-z']*")
_TOKEN = re.compile(rf"{CJK_CHAR.pattern}|[A-Za-z][A-Za-z']*")
"""A word of a repeated phrase: a Latin word, or one CJK character (the count rule of ``agent.text``)."""
_OPENING = re.compile(rf"[\s\"'“‘「『(\[*_—-]*([A-Za-z][A-Za-z']*|{CJK_CHAR.pattern}{{1,2}})")
"""A sentence's opening word: a Latin word, or its first two CJK characters (他说, 她的)."""
_COMMON_OPENINGS = frozenset({"the", "and", "but", "a", "i"})
_STOP = frozenset(
    {
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "as",
        "is",
        "was",
        "were",
        "be",
        "been",
        "it",
        "its",
        "he",
        "she",
        "they",
        "them",
        "his",
        "her",
        "their",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "that",
        "this",
        "there",
        "then",
        "so",
        "not",
        "no",
        "had",
        "have",
        "has",
        "did",
        "do",
        "said",
    }
)


@dataclass(frozen=True)
class Hit:
    """One flagged span of a chapter: the rule, its family, ``[start, end)`` and a short detail."""

    rule: str
    family: str
    start: int
    end: int
    detail: str = ""


def stock_phrases(text: str, rules: LintRules) -> list[Hit]:
    """Every match of a stock-phrase rule."""
    low = text.lower()
    hits = []
    for rule in rules.rules:
        scanned = text if rule.case else low
        if rule.anchor not in scanned:
            continue
        for m in rule.pattern.finditer(scanned):
            if rule.word_start and m.start() > 0 and (low[m.start() - 1].isalnum() or low[m.start() - 1] == "_"):
                continue
            hits.append(Hit(rule.name, "stock", m.start(), m.end(), " ".join(text[m.start() : m.end()].split())))
    return hits


def _grams(text: str, n: int) -> tuple[list[tuple[str, ...]], list[tuple[int, int]]]:
    words = list(_TOKEN.finditer(text))
    low = [w.group(0).lower() for w in words]
    grams = [tuple(low[i : i + n]) for i in range(len(low) - n + 1)]
    spans = [(words[i].start(), words[i + n - 1].end()) for i in range(len(grams))]
    return grams, spans


def phrase_length(texts: list[str]) -> int:
    """How many words a repeated phrase has in this book: :data:`REPEAT_N_CJK` when most of its words are
    CJK characters, else :data:`REPEAT_N`."""
    cjk = sum(len(CJK_CHAR.findall(t)) for t in texts)
    latin = sum(len(_WORD.findall(t)) for t in texts)
    return REPEAT_N_CJK if cjk > latin else REPEAT_N


def repeated_phrases(texts: list[str]) -> list[list[Hit]]:
    """Per chapter: phrases of ``REPEAT_N`` words (CJK: characters) the book uses more often than its length
    explains.

    Overlapping repeated phrases (one long repeat) are one hit; a phrase of stop words only is ignored.
    """
    n = phrase_length(texts)
    parsed = [_grams(t, n) for t in texts]
    total_words = sum(len(g) for g, _ in parsed)
    threshold = REPEAT_BASE + total_words // REPEAT_PER_WORDS
    counts = Counter(g for grams, _ in parsed for g in grams)
    hits: list[list[Hit]] = []
    for text, (grams, spans) in zip(texts, parsed, strict=True):
        runs: list[tuple[int, int, int]] = []  # (start, end, uses of its most used gram)
        for gram, (start, end) in zip(grams, spans, strict=True):
            if counts[gram] < threshold or all(w in _STOP for w in gram):
                continue
            if runs and start <= runs[-1][1]:  # the same long repeat: widen it
                runs[-1] = (runs[-1][0], end, max(runs[-1][2], counts[gram]))
            else:
                runs.append((start, end, counts[gram]))
        hits.append(
            [
                Hit(
                    "repeated-phrase",
                    "repetition",
                    start,
                    end,
                    f"'{' '.join(text[start:end].lower().split())}' x{uses} in the book",
                )
                for start, end, uses in runs
            ]
        )
    return hits


def _openings(text: str, spans: list[tuple[int, int]]) -> list[str]:
    words = []
    for start, end in spans:
        m = _OPENING.match(text, start, end)
        words.append(m.group(1).lower() if m else "")
    return words


def monotonous_openings(text: str, spans: list[tuple[int, int]]) -> list[Hit]:
    """Runs of ``OPENING_RUN`` sentences opening alike, and one opening word on too many sentences."""
    words = _openings(text, spans)
    hits: list[Hit] = []
    i = 0
    while i < len(words):
        j = i
        while j + 1 < len(words) and words[j + 1] == words[i] and words[i]:
            j += 1
        if j - i + 1 >= OPENING_RUN:
            hits.append(
                Hit(
                    "same-opening",
                    "openings",
                    spans[i][0],
                    spans[j][1],
                    f"{j - i + 1} sentences in a row open with '{words[i]}'",
                )
            )
        i = j + 1
    counted = Counter(
        w for w, (s, _) in zip(words, spans, strict=True) if w and w not in _COMMON_OPENINGS and text[s] not in "\"'“‘"
    )
    if len(words) >= OPENING_MIN_SENTENCES and counted:
        word, n = counted.most_common(1)[0]
        if n / len(words) >= OPENING_SHARE:
            first = next(s for w, s in zip(words, spans, strict=True) if w == word)
            hits.append(
                Hit(
                    "opening-share", "openings", first[0], first[1], f"{n} of {len(words)} sentences open with '{word}'"
                )
            )
    return hits


@cache
def reference() -> dict[str, float]:
    """Words per million in the reference novels (``scripts/lint_reference.py`` builds the file)."""
    rates: dict[str, float] = {}
    for line in REFERENCE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            word, rate = line.split("\t")
            rates[word] = float(rate)
    return rates


def overused_words(text: str) -> list[tuple[str, str, int, float]]:
    """Words and names a chapter uses ``OVERUSE_RATIO`` times more often than the reference does.

    ``(kind, word, count, ratio)``, most overused first, kind ``name`` for a word the chapter never
    writes in lower case; stop words and words under four letters are left out. Listed, not flagged: a
    human novel's own subject (a whale, a family's name) is as overused as a machine's tic, so these
    words are the writer's to judge and are not counted in the score.
    """
    ref = reference()
    found = list(_WORD.finditer(text))
    total = len(found) or 1
    counts: Counter[str] = Counter()
    lower: set[str] = set()
    for m in found:
        word = m.group(0)
        low = word.lower()
        if len(low) < 4 or low in _STOP:
            continue
        counts[low] += 1
        if word == low:
            lower.add(low)
    names = set(counts) - lower
    rows = []
    for word, n in counts.items():
        if n < OVERUSE_MIN:
            continue
        ratio = (n * 1e6 / total) / ref.get(word, OVERUSE_FLOOR)
        if ratio >= OVERUSE_RATIO:
            rows.append((word, n, round(ratio, 1)))
    rows.sort(key=lambda r: -r[2])
    return [(("name" if word in names else "word"), word, n, ratio) for word, n, ratio in rows]


_TAG_AFTER = re.compile(
    r"[,!?…—-][\"”’']\s+(?:(?:he|she|they|I|we|you|[A-Z][a-z]+)\s+([a-z]+)|([a-z]+)\s+"
    r"(?:he|she|they|I|we|[A-Z][a-z]+))(\s+[a-z]+ly\b)?"
)


def tag_habits(text: str, rules: LintRules) -> list[Hit]:
    """Dialogue tags: a verb that is no way of speaking as a tag, each time; elaborate tags over plain ones."""
    hits: list[Hit] = []
    elaborate: list[tuple[int, int, str]] = []
    plain = 0
    by_verb: dict[str, int] = defaultdict(int)
    for m in _TAG_AFTER.finditer(text):
        verb = (m.group(1) or m.group(2) or "").lower()
        by_verb[verb] += 1
        if verb in rules.nonspeech_tags:
            hits.append(Hit("nonspeech-tag", "tags", m.start() + 2, m.end(), f"'{verb}' as a dialogue tag"))
        elif verb in rules.elaborate_tags:
            elaborate.append((m.start() + 2, m.end(), verb))
        elif verb in rules.plain_tags:
            plain += 1
    if len(elaborate) >= ELABORATE_MIN and len(elaborate) > plain:
        start, end, _ = elaborate[0]
        verbs = Counter(v for _, _, v in elaborate).most_common(3)
        hits.append(
            Hit(
                "elaborate-tags",
                "tags",
                start,
                end,
                f"{len(elaborate)} elaborate tags ({', '.join(f'{v} x{n}' for v, n in verbs)}) to {plain} plain",
            )
        )
    return hits
