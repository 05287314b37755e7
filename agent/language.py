"""The language a story is written in: detected from the prompt with no model, or given with ``--language``.

Detection is by script first (Han, kana, Hangul, Cyrillic, Greek, Arabic, Hebrew, Devanagari, Thai), then,
for Latin script, by the share of each language's commonest words. English is the default and adds no
line to any prompt (so English runs' prompts are unchanged); any other language adds one instruction.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

_SCRIPTS: tuple[tuple[str, str], ...] = (
    ("Japanese", "[\u3040-\u30ff]"),
    ("Korean", "[\uac00-\ud7af]"),
    ("Chinese", "[\u4e00-\u9fff\u3400-\u4dbf]"),
    ("Russian", "[\u0400-\u04ff]"),
    ("Greek", "[\u0370-\u03ff]"),
    ("Arabic", "[\u0600-\u06ff]"),
    ("Hebrew", "[\u0590-\u05ff]"),
    ("Hindi", "[\u0900-\u097f]"),
    ("Thai", "[\u0e00-\u0e7f]"),
)
_LATIN: dict[str, str] = {
    "English": "the and of to a in is was that he she it with his her for on you not",
    "French": "le la les et de des un une est dans que qui il elle pas pour sur au avec",
    "German": "der die das und ist nicht ein eine zu den mit sich auf dem im sie er es",
    "Spanish": "el la los las y de que en un una es por con no se su para del al",
    "Italian": "il lo la gli le e di che un una è per non con del della si nel",
    "Portuguese": "o a os as e de que em um uma é não com do da para se no na",
    "Dutch": "de het een en van is dat niet in op te zijn met hij zij voor",
}
"""Each Latin-script language's commonest words (space-separated)."""
CODES = {
    "English": "en",
    "French": "fr",
    "German": "de",
    "Spanish": "es",
    "Italian": "it",
    "Portuguese": "pt",
    "Dutch": "nl",
    "Chinese": "zh",
    "Japanese": "ja",
    "Korean": "ko",
    "Russian": "ru",
    "Greek": "el",
    "Arabic": "ar",
    "Hebrew": "he",
    "Hindi": "hi",
    "Thai": "th",
}
"""Language name -> ISO 639-1 code, for ``lang`` attributes of the view and exports."""
_WORD = re.compile(r"[^\W\d_]+")


def detect(text: str) -> str:
    """The language ``text`` is written in, by name (``English`` when nothing else is clear)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return "English"
    counts = {name: len(re.findall(pattern, text)) for name, pattern in _SCRIPTS}
    if counts["Japanese"] and counts["Japanese"] >= 0.05 * len(letters):
        return "Japanese"
    best = max(counts, key=counts.__getitem__)
    if counts[best] >= 0.3 * len(letters):
        return best
    words = Counter(w.lower() for w in _WORD.findall(text))
    scores = {name: sum(words[w] for w in common.split()) for name, common in _LATIN.items()}
    winner = max(scores, key=scores.__getitem__)
    # another language only on clear evidence: a few of its words, twice English's (a name such as
    # "Le Mans" or "Don Juan" in an English prompt does not switch the book's language)
    return winner if scores[winner] >= max(3, 2 * scores["English"]) else "English"


def resolve(prompt: str, given: str | None) -> str:
    """The run's language: ``given`` (``--language``; a name or an ISO code), else the prompt's."""
    if given:
        by_code = {code: name for name, code in CODES.items()}
        return by_code.get(given.lower(), given[:1].upper() + given[1:])
    return detect(prompt)


def code(language: str) -> str:
    """The ISO 639-1 code of ``language`` (``en`` when unknown), for HTML ``lang``."""
    return CODES.get(language, "en")


def instruction(language: str) -> str:
    """The line that tells a model which language to write in (empty for English)."""
    if language == "English":
        return ""
    return (
        f"Language: write everything in {language}, the language of the story prompt (titles, prose, "
        f"descriptions and state entries; JSON keys stay in English)."
    )


def language_line(prompt: str, config: Any) -> str:
    """:func:`instruction` for a run: its ``language`` setting if it has one, else the prompt's language."""
    return instruction(resolve(prompt, getattr(config, "language", None)))


def run_language_code(config: Any) -> str:
    """The ISO code of a stored run's language (its ``language`` setting, else its prompt's), for the
    view's and the exports' ``lang``; ``en`` for a run with neither (an imported book)."""
    config = config if isinstance(config, dict) else {}
    prompt = config.get("prompt") if isinstance(config.get("prompt"), str) else ""
    given = config.get("language") if isinstance(config.get("language"), str) else None
    if not prompt and not given:
        return "en"
    return code(resolve(prompt, given))
