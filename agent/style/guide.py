"""The style guide a run keeps of the writer's sample: the measured card, the sample's passages, its profile.

Built once from the ``--style`` file (any manuscript format fabula imports) and stored in the run's plan
table as ``style``; every chapter prompt carries the card and the passages most relevant to the chapter's
outline item (BM25), so the examples fit the scene. Model-free: the card is the measured features
in words; a model-written line may be added as ``description``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

from agent.style.delta import StyleProfile, profile
from agent.style.features import Features, measure, tokens
from agent.text import count_words

PASSAGE_WORDS = 180
"""Words per exemplar passage (whole paragraphs, at least this many)."""
EXEMPLARS = 3
"""Passages a chapter prompt carries."""


def build_guide(sample: str, *, source: str, description: str | None = None) -> dict[str, Any]:
    """The stored guide: ``source``, ``card`` (text), ``features``, ``profile``, ``passages``; ValueError for a
    sample too short to measure."""
    made = profile(sample)
    features = measure(sample)
    return {
        "source": source,
        "card": card_text(features, made),
        "description": description,
        "features": features.as_vector(),
        "profile": made.to_dict(),
        "passages": passages(sample),
    }


def card_text(features: Features, made: StyleProfile) -> str:
    """The measured features in a few plain lines a writer (and a model) can follow."""
    punct = features.punctuation
    habits = ", ".join(f"{name} {rate:.1f}" for name, rate in sorted(punct.items(), key=lambda kv: -kv[1]) if rate)
    return "\n".join(
        [
            f"- Narration: {features.person} person, {features.tense} tense.",
            f"- Sentences: {features.sentence_mean:.0f} words on average (spread {features.sentence_spread:.0f}); "
            f"{features.short_sentences:.0%} short (8 words or fewer), "
            f"{features.long_sentences:.0%} long (30 or more).",
            f"- Paragraphs: {features.paragraph_mean:.0f} words on average.",
            f"- Dialogue: {features.dialogue_share:.0%} of the words are inside quotation marks.",
            f"- Punctuation per 1,000 words: {habits or 'little'}.",
            f"- Most frequent function words: {', '.join(made.words[:12])}.",
        ]
    )


def passages(sample: str, size: int = PASSAGE_WORDS) -> list[str]:
    """The sample cut into passages of whole paragraphs of at least ``size`` words."""
    out: list[str] = []
    current: list[str] = []
    count = 0
    for paragraph in (p.strip() for p in re.split(r"\n\s*\n", sample)):
        if not paragraph:
            continue
        current.append(paragraph)
        count += count_words(paragraph)
        if count >= size:
            out.append("\n\n".join(current))
            current, count = [], 0
    if current:
        out.append("\n\n".join(current))
    return out


def best_passages(query: str, pool: list[str], k: int = EXEMPLARS) -> list[str]:
    """The ``k`` passages of ``pool`` most relevant to ``query`` by BM25 (ties: sample order), in sample order."""
    if not pool:
        return []
    docs = [Counter(tokens(p)) for p in pool]
    lengths = [sum(d.values()) for d in docs]
    average = sum(lengths) / len(lengths) or 1.0
    terms = set(tokens(query))
    scores = []
    for i, (doc, length) in enumerate(zip(docs, lengths, strict=True)):
        score = 0.0
        for term in terms:
            have = sum(1 for d in docs if term in d)
            if not have or term not in doc:
                continue
            idf = math.log(1 + (len(docs) - have + 0.5) / (have + 0.5))
            tf = doc[term]
            score += idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average))
        scores.append((-score, i))
    chosen = sorted(i for _, i in sorted(scores)[:k])
    return [pool[i] for i in chosen]


def prompt_block(guide: dict[str, Any], item: dict[str, Any], *, card: bool = True, exemplars: bool = True) -> str:
    """The ``# Style`` block of a writer's prompt for outline ``item``: the card, then the passages."""
    if not (card or exemplars):
        return ""
    parts = ["# Style (write in the voice of the writer's sample)"]
    if card:
        parts.append(guide["card"])
        if guide.get("description"):
            parts.append(guide["description"])
    if exemplars:
        query = f"{item.get('title', '')} {item.get('description', '')}"
        for number, passage in enumerate(best_passages(query, guide["passages"]), start=1):
            parts.append(f"## Example passage {number} (for the voice only; do not copy its events)\n{passage}")
    return "\n".join(parts)


def chapter_distance(guide: dict[str, Any], text: str) -> dict[str, Any]:
    """The stored distance of a chapter's ``text`` from the guide's sample (``agent.style.delta.Distance``)."""
    return StyleProfile.from_dict(guide["profile"]).distance(text).to_dict()
