"""The style distance between a text and a writer's sample, with no model: Burrows' Delta.

The sample is cut into chunks of about :data:`CHUNK_WORDS` words; for each of its most frequent
function words (and each measured feature) the chunks give a mean and a spread. A text's distance
is the mean absolute z-score of its own rates against them: how many of the sample's own
standard deviations the text sits from the sample, on average. Standardising by the sample's own
variation (rather than by a reference corpus) lets one sample stand alone, in any language.
Validated on public-domain novels in docs/design/style-measure.md (scripts/validate_style_measure.py).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.style.features import FUNCTION_WORDS, measure, tokens
from agent.text import count_words

CHUNK_WORDS = 500
"""Words per sample chunk: small enough that a few thousand words give several chunks."""
TOP_WORDS = 30
"""How many of the sample's most frequent function words the Delta uses."""
SPREAD_FLOOR = 0.2
"""A spread is at least this share of its mean, so a word the sample uses evenly does not dominate."""
DRIFT_THRESHOLD = 1.3
"""A chapter whose distance exceeds this is flagged as drifting from the sample (see the validation)."""
Z_CAP = 5.0
"""A single dimension adds at most this many spreads, so one habit absent from the sample cannot swamp the rest."""
FEATURE_FLOOR = {
    "sentence_mean": 1.0,
    "sentence_spread": 1.0,
    "paragraph_mean": 5.0,
    "short_sentences": 0.03,
    "long_sentences": 0.03,
    "dialogue_share": 0.03,
    "past_tense": 0.05,
}
"""The least spread a feature is given (its unit: words, a share); rates per 1,000 words get 1.0."""
MIN_SAMPLE_WORDS = 1000
"""Fewer words than this give too few chunks to measure a spread; such a sample is refused."""


@dataclass(frozen=True)
class Distance:
    """How far a text sits from a sample: the word Delta, the feature Delta, and their mean."""

    words: float
    features: float
    total: float
    drifted: bool
    farthest: list[str] = field(default_factory=list)
    """The features that sit farthest from the sample, farthest first (what a reader should look at)."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StyleProfile:
    """The statistics of a sample the Delta needs: per-dimension mean and spread over its chunks."""

    words: list[str]
    word_mean: list[float]
    word_spread: list[float]
    feature_mean: dict[str, float]
    feature_spread: dict[str, float]
    chunks: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StyleProfile:
        return cls(**data)

    def distance(self, text: str, *, threshold: float = DRIFT_THRESHOLD) -> Distance:
        """The :class:`Distance` of ``text`` from this sample."""
        rates = word_rates(text, self.words)
        word_z = [min(Z_CAP, abs(r - m) / s) for r, m, s in zip(rates, self.word_mean, self.word_spread, strict=True)]
        vector = measure(text).as_vector()
        feature_z = {
            name: min(Z_CAP, abs(vector[name] - mean) / self.feature_spread[name])
            for name, mean in self.feature_mean.items()
        }
        words = sum(word_z) / len(word_z) if word_z else 0.0
        features = sum(feature_z.values()) / len(feature_z) if feature_z else 0.0
        total = (words + features) / 2
        farthest = [name for name, z in sorted(feature_z.items(), key=lambda kv: -kv[1]) if z > 2.0][:3]
        return Distance(
            words=round(words, 3),
            features=round(features, 3),
            total=round(total, 3),
            drifted=total > threshold,
            farthest=farthest,
        )


def chunks(text: str, size: int = CHUNK_WORDS) -> list[str]:
    """``text`` cut at paragraph (else sentence-ish line) ends into pieces of at least ``size`` words."""
    parts = [p for p in re.split(r"\n\s*\n|\n", text) if p.strip()]
    out: list[str] = []
    current: list[str] = []
    count = 0
    for part in parts:
        current.append(part)
        count += count_words(part)
        if count >= size:
            out.append("\n\n".join(current))
            current, count = [], 0
    if current and count >= size // 2:
        out.append("\n\n".join(current))
    return out


def word_rates(text: str, words: list[str]) -> list[float]:
    """The rate of each of ``words`` among the tokens of ``text``."""
    counts = Counter(tokens(text))
    total = sum(counts.values()) or 1
    return [counts[w] / total for w in words]


def profile(sample: str) -> StyleProfile:
    """The :class:`StyleProfile` of ``sample``; raises ValueError for a sample too short to measure."""
    words_in = count_words(sample)
    if words_in < MIN_SAMPLE_WORDS:
        raise ValueError(f"the style sample has {words_in} words; give at least {MIN_SAMPLE_WORDS}")
    pieces = chunks(sample)
    if len(pieces) < 2:
        pieces = _halves(sample)
    counts = Counter(t for t in tokens(sample) if t in _FUNCTION_SET)
    chosen = [w for w, _ in counts.most_common(TOP_WORDS)]
    rows = [word_rates(piece, chosen) for piece in pieces]
    word_mean, word_spread = _mean_spread(rows)
    vectors = [measure(piece).as_vector() for piece in pieces]
    names = list(vectors[0])
    feature_mean, feature_spread = _mean_spread([[v[n] for n in names] for v in vectors])
    feature_spread = [max(s, FEATURE_FLOOR.get(n, 1.0)) for n, s in zip(names, feature_spread, strict=True)]
    return StyleProfile(
        words=chosen,
        word_mean=word_mean,
        word_spread=word_spread,
        feature_mean=dict(zip(names, feature_mean, strict=True)),
        feature_spread=dict(zip(names, feature_spread, strict=True)),
        chunks=len(pieces),
    )


_FUNCTION_SET = frozenset(FUNCTION_WORDS)


def _halves(text: str) -> list[str]:
    middle = len(text) // 2
    return [text[:middle], text[middle:]]


def _mean_spread(rows: list[list[float]]) -> tuple[list[float], list[float]]:
    columns = list(zip(*rows, strict=True)) if rows else []
    means = [sum(c) / len(c) for c in columns]
    spreads = []
    for column, mean in zip(columns, means, strict=True):
        sd = (sum((x - mean) ** 2 for x in column) / max(1, len(column) - 1)) ** 0.5
        spreads.append(max(sd, SPREAD_FLOOR * abs(mean), 1e-4))
    return means, spreads
