"""How much a text repeats itself: one definition for the evaluation and the guards.

``fabula eval metrics`` reports the repeated-4-gram rate and distinct-n of a story; the
pipelines' repetition guard rejects a prose reply whose rate or longest repeated span is over
a threshold, quoting the span back to the model; the LLM layer retries a structured reply that
was cut at ``max_tokens`` because it looped. All of them measure with the functions here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.text import CJK_CLASS

_TOKEN = re.compile(f"[{CJK_CLASS}]|[A-Za-z0-9][A-Za-z0-9'_-]*")
LOOP_RATE = 0.5
"""A structured reply cut at max_tokens with at least this 4-gram repetition looped."""


def tokens(text: str) -> list[str]:
    """Lower-cased tokens under the shared word rule (so n-gram counts match word counts)."""
    return [t.lower() for t in _TOKEN.findall(text)]


def distinct_n(toks: list[str], n: int) -> float | None:
    """Unique n-grams over all n-grams (``None`` for a text shorter than ``n``)."""
    grams = [tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)]
    return len(set(grams)) / len(grams) if grams else None


def repeated_ngram_rate(toks: list[str], n: int = 4) -> float | None:
    """Share of n-gram occurrences that repeat an n-gram seen earlier in the text."""
    grams = [tuple(toks[i : i + n]) for i in range(len(toks) - n + 1)]
    return 1 - len(set(grams)) / len(grams) if grams else None


def longest_repeated_span(toks: list[str]) -> tuple[int, int]:
    """``(length, start)`` of the longest token sequence that occurs twice without overlap.

    Grows a window while some earlier occurrence still matches; linear enough for a chapter
    (a hash of each n-gram, n doubling then refined), and exact for what the guard needs."""
    best, where = 0, 0
    low, high = 1, len(toks) // 2
    while low <= high:
        n = (low + high) // 2
        start = _repeat_of_length(toks, n)
        if start is None:
            high = n - 1
        else:
            best, where, low = n, start, n + 1
    return best, where


def _repeat_of_length(toks: list[str], n: int) -> int | None:
    seen: dict[tuple[str, ...], int] = {}
    for i in range(len(toks) - n + 1):
        gram = tuple(toks[i : i + n])
        first = seen.setdefault(gram, i)
        if i - first >= n:
            return first
    return None


@dataclass(frozen=True)
class Repetition:
    """A text's repetition: the 4-gram rate and its longest span repeated word for word."""

    rate: float
    span_words: int
    span: str

    def exceeds(self, max_rate: float, max_span: int) -> bool:
        return self.rate > max_rate or self.span_words >= max_span

    def feedback(self) -> str:
        """What a rejected draft is told: the span it repeated, quoted."""
        return (
            f"REJECTED: the draft repeats itself ({self.rate:.0%} of its 4-word sequences are repeats; "
            f'this passage occurs more than once: "{self.span}"). Write it again without repeating '
            "sentences or phrases: each sentence must move the story forward."
        )


def measure(text: str) -> Repetition:
    toks = tokens(text)
    rate = repeated_ngram_rate(toks, 4) or 0.0
    length, start = longest_repeated_span(toks)
    return Repetition(rate, length, " ".join(toks[start : start + min(length, 25)]) if length else "")


_PERIODIC_TAIL = re.compile(r"(.{1,12}?)\1{11,}$", re.DOTALL)
"""The end of a text made of one short piece repeated at least 12 times: a loop inside a word or
a number ("25000000000...", "{ 100 } { 100 } ...") that word n-grams cannot see."""
TAIL_CHARS = 400
MIN_LOOP_CHARS = 40
_RUN_ON = re.compile(r"[A-Za-z\u00C0-\u024F]{80,}")
"""Eighty Latin letters with no space, digit or mark between them: no word of a language written
with spaces is that long (German's longest compounds stay under 70), and compact JSON has quotes
and colons between its words; the tiny model's runaway string fields are ("...Charangaperservice
AvatarImmutableParisalshipResposal..." for 4,096 tokens, seen in a chapter update)."""


_DIGITS = re.compile(r"[0-9]+")


def loop_tokens(text: str) -> list[str]:
    """:func:`tokens` with every number made one: a counting loop ("Ines: * 1. Ines: * 2. ...",
    seen filling a Magnet action to its limit four times running) repeats its 4-grams then."""
    return [_DIGITS.sub("#", t) for t in tokens(text)]


def is_looping(text: str) -> bool:
    """A reply that mostly repeats itself or ran away (used on structured replies cut at
    max_tokens): its words repeat (4-gram rate, numbers alike), or its end ran away
    (:func:`runs_away`)."""
    toks = loop_tokens(text)
    if len(toks) >= 24 and (repeated_ngram_rate(toks, 4) or 0.0) >= LOOP_RATE:
        return True
    return runs_away(text)


MIN_LOOP_WORDS = 48
"""Words a reply's tail needs before :func:`ran_away` reads its 4-gram rate: a short list of
JSON items repeats its keys, a loop of whole phrases fills a window this size."""


def ran_away(tail: str, loop_text: str | None = None) -> bool:
    """The check a backend runs while a structured reply is written, on its tail (the last few
    hundred tokens): it :func:`runs_away`, or the words of ``loop_text`` (the tail by default)
    loop (half its 4-grams repeats, the rate :func:`is_looping` reads on a reply cut at
    ``max_tokens``). Both backends stop here: the embedded engines between tokens
    (:mod:`agent.llm.local_decoding`), the endpoint on its streamed reply (:mod:`agent.llm.stream`),
    each reading the words of :func:`loop_tail`."""
    toks = loop_tokens(tail if loop_text is None else loop_text)
    if len(toks) >= MIN_LOOP_WORDS and (repeated_ngram_rate(toks, 4) or 0.0) >= LOOP_RATE:
        return True
    return runs_away(tail)


_JSON_PAIR = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:\s*"((?:[^"\\]|\\.)*)(?:"|$)', re.DOTALL)
MIN_QUOTE_CHARS = 12
"""Shorter strings are not taken for quotes (an empty string is in every string)."""
QUOTE_SLACK = 40
"""A value may wrap an earlier one in this many characters and still be its quote ("<i>...</i>")."""


def _quotes(value: str, earlier: str) -> bool:
    return value in earlier or (earlier in value and len(value) - len(earlier) <= QUOTE_SLACK)


def without_quotes(text: str) -> str:
    """A JSON reply's text (whole, or cut off mid-string) with every string value that quotes an
    earlier value under another key left empty. An update's evidence is a passage of the chapter,
    often its own description word for word, so the two would read as a loop of 4-grams; a value
    repeated under the same key (one entry listed again and again) still reads as one."""
    seen: list[tuple[str, str]] = []
    parts: list[str] = []
    last = 0
    for match in _JSON_PAIR.finditer(text):
        key, value = match.group(1), match.group(2).strip()
        if len(value) >= MIN_QUOTE_CHARS and any(
            k != key and len(earlier) >= MIN_QUOTE_CHARS and _quotes(value, earlier) for k, earlier in seen
        ):
            parts.append(text[last : match.start(2)])
            last = match.end(2)
        seen.append((key, value))
    parts.append(text[last:])
    return "".join(parts)


def loop_tail(reply: str, tail: str) -> str:
    """What :func:`ran_away` reads for loops in a structured reply so far: as much of its end,
    without quotes (:func:`without_quotes`), as ``tail`` holds (the whole reply is read: 4 ms for
    15,000 characters of update, every 32 tokens)."""
    return without_quotes(reply)[-len(tail) :] if tail else ""


def runs_away(text: str) -> bool:
    """The end of a reply has gone off the rails in a way that shows while it is written: one
    short piece over and over (a loop inside a word or number), or a run-on "word" of Latin
    letters (word salad inside a string field). Looks at the tail only, so a backend can call it
    during generation and stop there instead of at ``max_tokens``."""
    tail = text.rstrip()[-TAIL_CHARS:]
    periodic = _PERIODIC_TAIL.search(tail)
    if periodic is not None and periodic.end() - periodic.start() >= MIN_LOOP_CHARS:
        return True
    return _RUN_ON.search(tail) is not None
