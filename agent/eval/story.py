"""A judged story as the evaluation sees it: numbered sections read from a stored run.

Chapter-based runs (NstAgent, RollSum, Direct) give one section per chapter. Step runs
(Magnet, its ablations, the single-model baseline) have paragraphs, not chapters: a section is
a fixed span of paragraphs, the same for every method of that family, so section counts and
sampled sections compare (grouping by goal made the baseline one section and Magnet sixteen,
and showed the judge the goal). Nothing here imports a pipeline: only what the store holds.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from agent.store import RunStore
from agent.store.records import Paragraph
from agent.store.snapshots import RunTarget
from agent.text import count_words


@dataclass(frozen=True)
class Section:
    index: int
    title: str
    text: str
    words: int


@dataclass(frozen=True)
class Story:
    """The text to judge and what identifies it for pairing and caching."""

    run_dir: str
    pipeline: str
    sections: list[Section]
    prompt: str
    prompt_key: str
    target_words: int | None

    @property
    def words(self) -> int:
        return sum(s.words for s in self.sections)

    @property
    def text(self) -> str:
        return "\n\n".join(s.text for s in self.sections)

    @property
    def digest(self) -> str:
        """SHA-256 of the sections' titles and texts: a judgment is tied to exactly this text."""
        h = hashlib.sha256()
        for s in self.sections:
            h.update(f"{s.index}\x00{s.title}\x00{s.text}\x01".encode())
        return h.hexdigest()


def load_story(store: RunStore) -> Story:
    info = store.info()
    if info.unit_kind == "chapter":
        sections = [Section(c.index, c.title, c.text, c.words) for c in store.chapters()]
    else:
        sections = _magnet_sections(store)
    target = RunTarget.of(info.config)
    return Story(str(store.run_dir), info.pipeline, sections, target.prompt, target.key, target.words)


SECTION_PARAGRAPHS = 6
"""Paragraphs per editorial section of a step run: a fixed span, the same for Magnet, its
ablations and the single-model baseline, so section counts and judgments compare."""


def magnet_groups(store: RunStore) -> list[tuple[str | None, list[Paragraph]]]:
    """Consecutive paragraphs in fixed spans of ``SECTION_PARAGRAPHS``: one group per section.
    The title is never the goal (a judge must not be shown what the pipeline aimed at)."""
    paragraphs = store.paragraphs()
    spans = [paragraphs[i : i + SECTION_PARAGRAPHS] for i in range(0, len(paragraphs), SECTION_PARAGRAPHS)]
    return [(f"Section {n}", span) for n, span in enumerate(spans, start=1)]


def _magnet_sections(store: RunStore) -> list[Section]:
    sections = []
    for i, (title, paragraphs) in enumerate(magnet_groups(store), start=1):
        text = "\n\n".join(p.text for p in paragraphs)
        sections.append(Section(i, title or f"Section {i}", text, count_words(text)))
    return sections
