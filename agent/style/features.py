"""Measured, model-free features of a text's style: the numbers a style card shows and the Delta uses.

Every feature is a rate or a mean that does not grow with the text's length, so a 500-word chunk of
the sample and a 3,000-word chapter are comparable. Words and sentences are counted by
:mod:`agent.text` (one rule for the whole program; each CJK character is a word).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from agent.text import CJK_CHAR, LATIN_WORD, count_words, split_sentences

FUNCTION_WORDS: tuple[str, ...] = (
    # English: articles, pronouns, auxiliaries, prepositions, conjunctions, common adverbs
    "the",
    "a",
    "an",
    "and",
    "or",
    "but",
    "nor",
    "so",
    "yet",
    "for",
    "of",
    "to",
    "in",
    "on",
    "at",
    "by",
    "with",
    "from",
    "into",
    "upon",
    "about",
    "over",
    "under",
    "after",
    "before",
    "through",
    "up",
    "down",
    "out",
    "off",
    "as",
    "than",
    "like",
    "that",
    "this",
    "these",
    "those",
    "which",
    "who",
    "whom",
    "whose",
    "what",
    "when",
    "where",
    "while",
    "if",
    "then",
    "there",
    "here",
    "not",
    "no",
    "all",
    "any",
    "some",
    "such",
    "very",
    "more",
    "most",
    "much",
    "only",
    "even",
    "still",
    "just",
    "now",
    "never",
    "ever",
    "again",
    "too",
    "also",
    "i",
    "me",
    "my",
    "we",
    "us",
    "our",
    "you",
    "your",
    "he",
    "him",
    "his",
    "she",
    "her",
    "it",
    "its",
    "they",
    "them",
    "their",
    "be",
    "is",
    "am",
    "are",
    "was",
    "were",
    "been",
    "being",
    "have",
    "has",
    "had",
    "do",
    "does",
    "did",
    "will",
    "would",
    "shall",
    "should",
    "can",
    "could",
    "may",
    "might",
    "must",
    "one",
    "own",
    "same",
    "other",
    "every",
    "each",
    "because",
    "though",
    "although",
    "until",
    "without",
    "within",
    "against",
    "between",
    "among",
    "whether",
    "how",
    "why",
    # Chinese: particles, pronouns, copula, common adverbs and prepositions (one character = one word)
    "的",
    "了",
    "是",
    "在",
    "不",
    "我",
    "他",
    "她",
    "你",
    "这",
    "那",
    "就",
    "也",
    "都",
    "而",
    "着",
    "说",
    "一",
    "有",
    "和",
    "把",
    "被",
    "吗",
    "呢",
    "吧",
    "啊",
    "们",
    "个",
    "又",
    "还",
    "却",
    "已",
    "从",
    "向",
    "对",
    "让",
    "给",
    "得",
    "地",
    "之",
    "与",
    "很",
    "再",
    "没",
    "只",
    "才",
    "要",
    "会",
    "能",
)
"""Candidates for the function-word profile; a sample's own most frequent ones among them are used."""

_FIRST_PERSON = frozenset({"i", "me", "my", "we", "us", "our", "我", "们"})
_THIRD_PERSON = frozenset({"he", "him", "his", "she", "her", "they", "them", "their", "他", "她"})
_PAST = frozenset({"was", "were", "had", "did", "said", "went", "came", "looked", "saw", "knew", "thought"})
_PRESENT = frozenset({"is", "are", "am", "has", "does", "says", "goes", "comes", "looks", "sees", "knows", "thinks"})
_QUOTED = re.compile(r"“[^”]*”|\"[^\"\n]*\"|「[^」]*」|『[^』]*』")
PUNCTUATION = {
    "comma": ",，",
    "semicolon": ";；",
    "colon": ":：",
    "dash": "—–",
    "exclamation": "!！",
    "question": "?？",
    "ellipsis": "…",
    "parenthesis": "(（",
}
"""Punctuation habits counted per 1,000 words (each name stands for its Latin and CJK forms)."""


def tokens(text: str) -> list[str]:
    """Lower-cased Latin words and single CJK characters, in order: the units word profiles count."""
    found: list[tuple[int, str]] = [(m.start(), m.group().lower().strip("'_-")) for m in LATIN_WORD.finditer(text)]
    found += [(m.start(), m.group()) for m in CJK_CHAR.finditer(text)]
    found.sort()
    return [word for _, word in found if word]


@dataclass(frozen=True)
class Features:
    """The measured features of one text (see :func:`measure`)."""

    words: int
    sentence_mean: float
    """Mean sentence length in words."""
    sentence_spread: float
    """Standard deviation of sentence length in words."""
    short_sentences: float
    """Share of sentences of 8 words or fewer."""
    long_sentences: float
    """Share of sentences of 30 words or more."""
    paragraph_mean: float
    """Mean paragraph length in words."""
    dialogue_share: float
    """Share of words inside quotation marks."""
    first_person: float
    """First-person pronouns per 1,000 words (outside quotations)."""
    third_person: float
    """Third-person pronouns per 1,000 words (outside quotations)."""
    past_tense: float
    """Share of past forms among a fixed set of common past/present verb forms (outside quotations)."""
    punctuation: dict[str, float]
    """Each habit in :data:`PUNCTUATION` per 1,000 words."""

    def as_vector(self) -> dict[str, float]:
        """Every feature as ``name -> number`` (punctuation as ``punct_<name>``), for the Delta."""
        values = {
            "sentence_mean": self.sentence_mean,
            "sentence_spread": self.sentence_spread,
            "short_sentences": self.short_sentences,
            "long_sentences": self.long_sentences,
            "paragraph_mean": self.paragraph_mean,
            "dialogue_share": self.dialogue_share,
            "first_person": self.first_person,
            "third_person": self.third_person,
            "past_tense": self.past_tense,
        }
        values.update({f"punct_{name}": rate for name, rate in self.punctuation.items()})
        return values

    @property
    def person(self) -> str:
        """``first`` or ``third``: the narration's grammatical person, by pronoun rate."""
        return "first" if self.first_person >= self.third_person * 0.5 else "third"

    @property
    def tense(self) -> str:
        """``past`` or ``present``: the narration's tense, by the share of past forms."""
        return "past" if self.past_tense >= 0.5 else "present"


def measure(text: str) -> Features:
    """The :class:`Features` of ``text`` (an empty text gives zeros)."""
    words = count_words(text)
    per_k = 1000.0 / words if words else 0.0
    lengths = [n for n in (count_words(s) for s in split_sentences(text)) if n]
    mean = sum(lengths) / len(lengths) if lengths else 0.0
    spread = (sum((n - mean) ** 2 for n in lengths) / len(lengths)) ** 0.5 if lengths else 0.0
    paragraphs = [n for n in (count_words(p) for p in re.split(r"\n\s*\n", text)) if n]
    quoted = sum(count_words(m.group()) for m in _QUOTED.finditer(text))
    narration = Counter(tokens(_QUOTED.sub(" ", text)))
    past = sum(narration[w] for w in _PAST)
    present = sum(narration[w] for w in _PRESENT)
    return Features(
        words=words,
        sentence_mean=mean,
        sentence_spread=spread,
        short_sentences=sum(n <= 8 for n in lengths) / len(lengths) if lengths else 0.0,
        long_sentences=sum(n >= 30 for n in lengths) / len(lengths) if lengths else 0.0,
        paragraph_mean=sum(paragraphs) / len(paragraphs) if paragraphs else 0.0,
        dialogue_share=min(1.0, quoted / words) if words else 0.0,
        first_person=sum(narration[w] for w in _FIRST_PERSON) * per_k,
        third_person=sum(narration[w] for w in _THIRD_PERSON) * per_k,
        past_tense=past / (past + present) if past + present else 0.5,
        punctuation={name: sum(text.count(c) for c in chars) * per_k for name, chars in PUNCTUATION.items()},
    )
