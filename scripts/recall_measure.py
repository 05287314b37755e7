"""What the recall benchmark counts: is a needed fact's needle in the writer's prompt, and in
which section of it (``scripts/bench_recall.py``).

A writer's prompt is cut into sections in prompt order: the narrative state (verbatim entries)
and its digests, RollSum's summary, search results, read results, a retained rejected draft,
Direct's own story so far, and the rest (system prompt, outline, task, verdicts, tool calls).
A need is recalled when the needle occurs in one of them (whitespace-normalised, exact
otherwise), and is attributed to the first section in prompt order that holds it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from agent.quotes import normalize

Section = tuple[str, str]
"""(source, text)."""
SOURCES = ("state", "digest", "summary", "search", "read", "draft", "own_text", "other")
_HEADING = re.compile(r"^# (.+?)\n", re.MULTILINE)
_SEARCH = re.compile(r"^\d+ passage\(s\) for ")
_READ = re.compile(r"^Chapter \d+: ")


def chapter_prompt_sections(text: str) -> list[Section]:
    """The opening user message of NstAgent or RollSum, by its ``# `` headings; the state's digest
    lines are the ``digest`` source, its other lines ``state``."""
    out: list[Section] = []
    starts = [m.start() for m in _HEADING.finditer(text)] + [len(text)]
    if starts[0] > 0:
        out.append(("other", text[: starts[0]]))
    for begin, end in pairwise(starts):
        part = text[begin:end]
        heading = part.split("\n", 1)[0]
        if heading.startswith("# Narrative state"):
            lines = part.splitlines()
            out.append(("digest", "\n".join(x for x in lines if x.startswith("[digest of chapters"))))
            out.append(("state", "\n".join(x for x in lines if not x.startswith("[digest of chapters"))))
        elif heading.startswith("# Story so far"):
            out.append(("summary", part))
        else:
            out.append(("other", part))
    return out


def message_sections(messages: Sequence[dict[str, Any]]) -> list[Section]:
    """Every message of a writer's request, as sections in prompt order."""
    out: list[Section] = []
    for i, message in enumerate(messages):
        content, role = message["content"], message["role"]
        if i == 1 and role == "user":
            out += chapter_prompt_sections(content)
        elif role == "user" and _SEARCH.match(content):
            out.append(("search", content))
        elif role == "user" and _READ.match(content):
            out.append(("read", content))
        elif role == "assistant" and not content.lstrip().startswith(("{", "[")):
            out.append(("draft", content))  # a retained rejected draft of this chapter
        else:
            out.append(("other", content))
    return out


def source_of(needle: str, sections: Iterable[Section]) -> str | None:
    """The first section that holds ``needle`` (None: the prompt lacks it)."""
    wanted = normalize(needle)
    for source, text in sections:
        if wanted in normalize(text):
            return source
    return None


@dataclass
class Tally:
    """Needs counted over one run: how many, how many recalled, and where the recalled ones were."""

    needed: int = 0
    recalled: int = 0
    unwritten: int = 0
    """Needs of chapters the run never wrote (counted needed, not recalled)."""
    by_source: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, list[int]] = field(default_factory=dict)
    """kind -> [recalled, needed]."""
    dropped: int = 0
    """Needs missed although an earlier request of the same chapter had the needle: a lookup found
    it and the budget removed it before the writer's request (what the give-way order cost)."""

    def count(self, kind: str, source: str | None, written: bool = True) -> None:
        self.needed += 1
        self.unwritten += 0 if written else 1
        pair = self.by_kind.setdefault(kind, [0, 0])
        pair[1] += 1
        if source is not None:
            self.recalled += 1
            pair[0] += 1
            self.by_source[source] = self.by_source.get(source, 0) + 1

    @property
    def recall(self) -> float:
        return self.recalled / self.needed if self.needed else 0.0


def tally(facts: Iterable[Any], prompts: dict[int, list[Section]], seen: dict[int, str] | None = None) -> Tally:
    """Count every (fact, needing chapter) pair against ``prompts`` (chapter -> the sections of the
    prompt the writer had when writing it; a chapter missing from it was never written); ``seen``
    (chapter -> every message of the chapter's requests) tells a dropped need from one never found."""
    result = Tally()
    for fact in facts:
        for chapter in fact.needed:
            sections = prompts.get(chapter)
            source = source_of(fact.needle, sections or [])
            result.count(fact.kind, source, written=sections is not None)
            if source is None and normalize(fact.needle) in (seen or {}).get(chapter, ""):
                result.dropped += 1
    return result
