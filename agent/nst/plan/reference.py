"""The reference's chapter outline (``outline_style`` "reference", the ``paper`` profile; issue 33).

What the NstAgent reference code (zhennan1/NstAgent ``code/agent/agent_core.py``) asks of its planner
and how it reads the reply, in fabula's words, converted to fabula's outline at the boundary:

- **The count** (``recommend_chapter_count``): linear between the anchors (0 words, 0 chapters), 10K/10,
  20K/15, 50K/25, 100K/40 and 1M/100, rounded *up*, at least 1, and 100 from 1M words on.
- **The request** (``outline_chapters_prompt``): about that many chapters, the count adjustable, each
  chapter's length the planner's; a JSON *array* of ``{id, name, description, word_count}``, ids from
  0, and no book title.
- **The reply** is free text, decoded under no grammar (``llm_call_text``); a reply that did not stop
  by itself (``finish_reason`` other than "stop") is refused. Its JSON is read as ``extract_json`` reads
  it (:func:`extract_json`), a wrapper object or a lone chapter lifted to the array
  (``_coerce_json_list``), and checked (``_validate_chapter_outline``, :func:`check`).
- **A re-ask** (``_chat_json``, ``MAX_JSON_RETRIES`` attempts in all): the same conversation grows by
  the refused reply and a message naming the error (:func:`reask`); a reply cut short is asked again
  with nothing added.
- **Normalisation** (``_normalise_chapters``): ids renumbered by position, whatever the model wrote; a
  missing name made up. The targets are the model's own: the reference scales them to sum exactly
  to the story (``normalize_outline_word_targets``) only in its ``semantic`` ablation, which NstAgent
  (``nstagent.py``, mode ``narrative_ops``) never runs, and in RollSum's own outline, which the
  published commands replace by the shared frozen one.

Inside fabula the outline stays ``{title, chapters}`` with ids from 1 (:func:`to_fabula`): chapter
``i`` of the reply is chapter ``i + 1``, its ``name`` the chapter's title and its ``word_count`` its
``target_words``; the book's title, which the reference never asks for, is made from the story prompt
(:func:`book_title`).
"""

from __future__ import annotations

import json
import math
import re
from itertools import pairwise
from typing import Any

from agent.gate import DEFAULT_HIGH, DEFAULT_LOW, Gate

ANCHORS = ((0, 0), (10_000, 10), (20_000, 15), (50_000, 25), (100_000, 40), (1_000_000, 100))
"""The reference's ``CHAPTER_ANCHORS``: fabula's four (``planner.ANCHORS``) with both ends."""
LONG_FORM = 10_000
"""From this many words the outline may not be a single chapter (the reference's ``LONG_FORM_MIN_WORDS``)."""
WRAPPERS = ("chapters", "outline", "items", "data")
"""Keys of an object a model wraps its chapter array in; the first that holds a list is the array."""
TITLE_WORDS = 8


def chapter_count(words: int) -> int:
    """The reference's recommended count: linear between :data:`ANCHORS`, rounded up (the same float
    expression, so a count the reference gets by rounding up a float error, fabula gets too)."""
    if words <= 0:
        return 0
    if words >= ANCHORS[-1][0]:
        return ANCHORS[-1][1]
    for (w0, c0), (w1, c1) in pairwise(ANCHORS):
        if w0 <= words <= w1:
            return max(1, math.ceil(c0 + (words - w0) / (w1 - w0) * (c1 - c0)))
    return ANCHORS[-1][1]


def share(words: int, chapters: int) -> int:
    """The average chapter the request names (the reference rounds it to the nearest word)."""
    return max(1, round(words / max(1, chapters)))


def _slack(low: float, high: float) -> str:
    below, above = round((1 - low) * 100), round((high - 1) * 100)
    return f"±{below}%" if below == above else f"-{below}%/+{above}%"


def request(words: int, chapters: int, low: float = DEFAULT_LOW, high: float = DEFAULT_HIGH) -> str:
    """The outline task in the reference's terms, in fabula's words: about ``chapters`` chapters
    (adjustable), each chapter's length the planner's, a JSON array numbered from 0, no book title."""
    return (
        f"The whole novel should come to {words} words. Plan about {chapters} chapters, averaging about "
        f"{share(words, chapters)} words each; change the number a little if the plot needs it, but keep near "
        "it. How long each chapter is, is yours to decide.\n\n"
        "Give every chapter these fields:\n"
        "  - id: a whole number, 0 for the first chapter and one more for each chapter after it.\n"
        "  - name: the chapter's title, kept short.\n"
        "  - description: what the chapter holds: its main events, the characters' important moments, and how "
        "the plot moves on.\n"
        "  - word_count: how many words the chapter should have. All the chapters' word_count values together "
        f"must come within {_slack(low, high)} of the novel's total; key chapters may have more words and "
        "transitional ones fewer.\n\n"
        "Reply with the chapter outline as a JSON array:\n"
        "[\n"
        '  {"id": 0, "name": "...", "description": "...", "word_count": <int>},\n'
        '  {"id": 1, "name": "...", "description": "...", "word_count": <int>},\n'
        "  ...\n"
        "]\n\n"
        "Make each description cover everything its chapter must contain."
    )


def reask(error: str) -> str:
    """What a refused outline is told (the reference's re-ask, in fabula's words): the error, and to
    write the whole array again, fixing that and keeping to the story prompt, as JSON alone."""
    return (
        f"The outline was refused by the planner's checks: {error}. Write the whole JSON array again, fixing "
        "exactly that, and keep to every requirement of the story prompt. Reply with the JSON only."
    )


_FENCES = tuple(re.compile(rf"```{tag}\s*(.*?)\s*```", re.DOTALL) for tag in ("json", ""))
"""A fenced block marked ``json``, then any fenced block: the first of each is tried."""


def extract_json(text: str) -> Any:
    """The JSON of a free reply, read as the reference reads it: the whole reply; else the first fenced
    block (one marked ``json`` first) that parses; else the longest array or object anywhere in it
    (an array before an object of the same length, the earlier before the later). ``ValueError``
    when there is none."""
    text = text.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    for fence in _FENCES:
        found = fence.search(text)
        if found:
            try:
                return json.loads(found.group(1).strip())
            except json.JSONDecodeError:
                pass
    decoder = json.JSONDecoder()
    best: Any = None
    longest = 0
    for opening in "[{":
        for start in (i for i, c in enumerate(text) if c == opening):
            try:
                value, end = decoder.raw_decode(text, start)
            except json.JSONDecodeError:
                continue
            if end - start > longest:
                best, longest = value, end - start
    if longest:
        return best
    raise ValueError(f"no JSON could be read from the reply, which begins: {text[:300]}...")


def as_list(data: Any) -> list[Any]:
    """The chapter array of a parsed reply: the array itself, the first list a wrapper object holds
    under :data:`WRAPPERS`, or a lone chapter object as a one-chapter array."""
    if isinstance(data, list):
        return data
    if not isinstance(data, dict):
        raise ValueError(f"a JSON array of chapters was expected, not a JSON {type(data).__name__}")
    for key in WRAPPERS:
        if isinstance(data.get(key), list):
            return list(data[key])
    if {"id", "name", "description"} <= set(data):
        return [data]
    raise ValueError(f"a JSON array of chapters was expected, not an object with the keys {list(data)[:5]}")


_TWELVE = r"(?:12|twelve)"
_AGED_TWELVE = re.compile(rf"\b(?:at|aged?)\s+{_TWELVE}\b|\b{_TWELVE}[-\s]year[-\s]old\b")


def _makes_a_teen_twelve(prompt: str, chapters: list[Any]) -> bool:
    """The reference's one content check: the prompt asks for a teenager (and names no twelve) while
    the outline gives someone's age as twelve."""
    contract = " ".join(prompt.casefold().split())
    if not ("teenage" in contract or "teenager" in contract) or re.search(rf"\b{_TWELVE}\b", contract):
        return False
    return bool(_AGED_TWELVE.search(json.dumps(chapters, ensure_ascii=False).casefold()))


def check(
    chapters: Any, words: int, prompt: str = "", low: float = DEFAULT_LOW, high: float = DEFAULT_HIGH
) -> list[dict[str, Any]]:
    """The chapter array if the reference would accept it, else ``ValueError`` naming the first broken
    rule (chapters counted from 0, as the request numbers them): not empty, more than one chapter
    from :data:`LONG_FORM` words, each an object with a description and a positive whole
    ``word_count``, the counts summing into the gate around ``words``, no twelve-year-old where the
    prompt asks for a teenager. The count itself is free: the request only recommends one."""
    if not isinstance(chapters, list) or not chapters:
        raise ValueError("the chapter outline must be a JSON array with at least one chapter")
    if words >= LONG_FORM and len(chapters) == 1:
        raise ValueError(f"a story of {words} words cannot be a single chapter")
    total = 0
    for i, chapter in enumerate(chapters):
        if not isinstance(chapter, dict):
            raise ValueError(f"chapter {i} is not a JSON object")
        description = chapter.get("description")
        if not isinstance(description, str) or not description.strip():
            raise ValueError(f"chapter {i} has no description")
        count = chapter.get("word_count")
        if isinstance(count, bool) or not isinstance(count, int) or count <= 0:
            raise ValueError(f"chapter {i} needs a word_count that is a whole number above 0")
        total += count
    gate = Gate.for_target(words, low, high)
    if not gate.accepts(total):
        raise ValueError(
            f"the word_count values add up to {total}; for a story of {words} words they must add up to "
            f"between {gate.low} and {gate.high} ({_slack(low, high)})"
        )
    if _makes_a_teen_twelve(prompt, chapters):
        raise ValueError("the outline makes a character twelve, where the story prompt asks for a teenager")
    return chapters


def read(text: str, words: int, prompt: str = "", low: float = DEFAULT_LOW, high: float = DEFAULT_HIGH) -> list[Any]:
    """A reply's chapter array, checked (:func:`extract_json`, :func:`as_list`, :func:`check`)."""
    return check(as_list(extract_json(text)), words, prompt, low, high)


def to_fabula(chapters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The checked array as fabula's outline items: numbered by position from 1 (the reference
    renumbers from 0 whatever the model wrote), ``name`` the title (a missing or blank one is
    "Chapter N", N the fabula number), ``word_count`` the target, unscaled."""
    items = []
    for position, chapter in enumerate(chapters, start=1):
        name = chapter.get("name")
        title = " ".join(str(name).split()) if name is not None else ""
        items.append(
            {
                "id": position,
                "title": title or f"Chapter {position}",
                "description": chapter["description"].strip(),
                "target_words": chapter["word_count"],
            }
        )
    return items


def book_title(prompt: str) -> str:
    """A title for the book, which the reference's outline does not give: the story prompt's first
    sentence (of its first non-blank line), cut to its first eight words, without closing punctuation;
    "Untitled" for a prompt with no words."""
    line = next((ln.strip() for ln in prompt.splitlines() if ln.strip()), "")
    sentence = re.split(r"(?<=[.!?])\s", line, maxsplit=1)[0]
    words = sentence.split()[:TITLE_WORDS]
    title = " ".join(words).strip(" .,;:!?-–—\"'")
    return title or "Untitled"
