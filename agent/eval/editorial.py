"""Magnet's editorial evaluation (Magnet 3.4): annotations and rubric at three levels.

Story level: the whole story (logical consistency, thematic coherence, character arcs).
Section level: 5 random sections (goal-conflict-outcome, hook and close, necessity).
Sentence level: 5 random sentences (rhythm, clarity, syntax variety). The sample is drawn
by a seeded sampler and stored with each judgment. Annotation counts are summed over the
levels per judge and averaged over judges; the rubric gives 0-100 per category and an
overall per level, a judge's score is the mean of its three overalls, and the story's score
the mean over judges. A judge with any failed call contributes nothing for that story.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from agent.eval.judge import DATA_RULE, Call, Judge, as_data, run_calls
from agent.eval.story import Story
from agent.store import RunStore
from agent.store import judgments as stored
from agent.text import count_words, split_sentences
from grammars.judges import (
    SectionAnnotations,
    SectionRubric,
    SentenceAnnotations,
    SentenceRubric,
    StoryAnnotations,
    StoryRubric,
)

KIND = "editorial"
PROTOCOL_VERSION = "editorial-v1"
SAMPLE_SECTIONS = 5
SAMPLE_SENTENCES = 5
MIN_SENTENCE_WORDS = 4
LEVELS = ("story", "section", "sentence")
ITEMS = (
    "story",
    *(f"section:{i}" for i in range(1, SAMPLE_SECTIONS + 1)),
    "sentences",
    "rubric:story",
    "rubric:section",
    "rubric:sentence",
)
EDITOR = "You are an experienced fiction editor giving a professional editorial review. " + DATA_RULE


@dataclass(frozen=True)
class Sample:
    sections: list[int]
    """1-based positions of the sampled sections, in story order."""
    sentences: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"sections": self.sections, "sentences": self.sentences}


def sample(story: Story, seed: int) -> Sample:
    """The seeded sample: the same story and seed always give the same sections and sentences."""
    rng = random.Random(f"{seed}:{story.digest}")
    positions = list(range(1, len(story.sections) + 1))
    sections = sorted(rng.sample(positions, min(SAMPLE_SECTIONS, len(positions))))
    candidates = [
        s for sec in story.sections for s in split_sentences(sec.text) if count_words(s) >= MIN_SENTENCE_WORDS
    ]
    picked = sorted(rng.sample(range(len(candidates)), min(SAMPLE_SENTENCES, len(candidates))))
    return Sample(sections, [candidates[i] for i in picked])


def _messages(system: str, user: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": f"{EDITOR}\n\n{system}"},
        {"role": "user", "content": f"{user}\n\nReply with the JSON object only."},
    ]


def build_calls(story: Story, picked: Sample, protocol_meta: dict[str, Any]) -> list[Call]:
    whole = as_data("\n\n".join(f"[Section {i}: {s.title}]\n{s.text}" for i, s in enumerate(story.sections, 1)))
    sentences = "\n".join(f"{i}. {s}" for i, s in enumerate(picked.sentences, start=1))
    story_level = (
        "Annotate problems in the whole story with respect to logical consistency, thematic coherence "
        "and character arc completion. Each annotation is one specific problem, with the passage it "
        "concerns quoted verbatim. Do not annotate strengths."
    )
    calls = [Call("story", _messages(story_level, f"Story:\n{whole}"), StoryAnnotations, protocol_meta)]
    for n, position in enumerate(picked.sections, start=1):
        sec = story.sections[position - 1]
        user = f"Section {position} of {len(story.sections)}:\n{as_data(f'[{sec.title}]' + chr(10) + sec.text)}"
        system = (
            "Annotate problems in this section with respect to goal-conflict-outcome progression, the "
            "quality of its opening hook and its close, and whether the section is necessary to the story. "
            "Each annotation is one specific problem, with the passage quoted verbatim. Do not annotate "
            "strengths."
        )
        calls.append(Call(f"section:{n}", _messages(system, user), SectionAnnotations, protocol_meta))
    system = (
        "Annotate problems in these numbered sentences with respect to rhythm, clarity and syntax variety. "
        "Each annotation names the sentence number and one specific problem. Do not annotate strengths."
    )
    calls.append(
        Call("sentences", _messages(system, f"Sentences:\n{as_data(sentences)}"), SentenceAnnotations, protocol_meta)
    )
    rubric = "Score from 0 to 100 each category and the overall quality at this level (100 is flawless)."
    calls.append(
        Call(
            "rubric:story",
            _messages(
                f"Rubric, story level: logical consistency, thematic coherence, character arcs. {rubric}",
                f"Story:\n{whole}",
            ),
            StoryRubric,
            protocol_meta,
        )
    )
    secs = as_data(
        "\n\n".join(
            f"[Section {p}: {story.sections[p - 1].title}]\n{story.sections[p - 1].text}" for p in picked.sections
        )
    )
    calls.append(
        Call(
            "rubric:section",
            _messages(
                f"Rubric, section level, over these sections together: "
                f"goal-conflict-outcome, hook and close, necessity. {rubric}",
                f"Sections:\n{secs}",
            ),
            SectionRubric,
            protocol_meta,
        )
    )
    calls.append(
        Call(
            "rubric:sentence",
            _messages(
                f"Rubric, sentence level, over these sentences together: rhythm, clarity, syntax variety. {rubric}",
                f"Sentences:\n{as_data(sentences)}",
            ),
            SentenceRubric,
            protocol_meta,
        )
    )
    return calls


def judge_editorial(store: RunStore, story: Story, judges: list[Judge], *, seed: int = 0) -> dict[str, int]:
    picked = sample(story, seed)
    protocol = f"{PROTOCOL_VERSION}|seed={seed}|{story.digest[:16]}"
    meta = {"sample": picked.as_dict(), "seed": seed, "digest": story.digest}
    counts = {"skipped": 0, "ok": 0, "failed": 0}
    for judge in judges:
        for key, value in run_calls(store, judge, KIND, protocol, build_calls(story, picked, meta)).items():
            counts[key] += value
    return counts


def judge_result(group: list[stored.Judgment]) -> dict[str, Any] | None:
    """One judge's counts and rubric from its judgments, or ``None`` if any call is missing/failed."""
    by_item = {j.item: j for j in group}
    sections = len(group[0].meta.get("sample", {}).get("sections", [])) if group else 0
    needed = [
        "story",
        *(f"section:{i}" for i in range(1, sections + 1)),
        "sentences",
        "rubric:story",
        "rubric:section",
        "rubric:sentence",
    ]
    if any(i not in by_item or not by_item[i].ok for i in needed):
        return None
    counts = {
        "story": len(by_item["story"].reply["annotations"]),
        "section": sum(len(by_item[f"section:{i}"].reply["annotations"]) for i in range(1, sections + 1)),
        "sentence": len(by_item["sentences"].reply["annotations"]),
    }
    rubric = {level: by_item[f"rubric:{level}"].reply for level in LEVELS}
    return {
        "annotations": sum(counts.values()),
        "annotations_by_level": counts,
        "rubric": sum(r["overall"] for r in rubric.values()) / 3,
        "rubric_by_level": {level: r["overall"] for level, r in rubric.items()},
        "rubric_categories": {k: v for r in rubric.values() for k, v in r.items() if k != "overall"},
    }


def editorial_scores(store: RunStore, story: Story) -> dict[str, Any] | None:
    """Annotations and rubric averaged over every judge with a complete result on the current text."""
    groups: dict[tuple[str, str], list[stored.Judgment]] = {}
    for j in stored.select(store, KIND):
        if j.meta.get("digest") == story.digest:
            groups.setdefault((j.judge, j.protocol), []).append(j)
    per_judge: dict[str, dict[str, Any]] = {}
    for (judge, _), group in sorted(groups.items(), key=lambda kv: max(j.updated_at for j in kv[1])):
        result = judge_result(group)
        if result is not None:
            per_judge[judge] = {**result, "judge_digest": group[0].meta.get("judge_digest")}
            # the latest complete protocol of each judge wins
    if not per_judge:
        return None
    n = len(per_judge)
    levels = {lv: sum(r["annotations_by_level"][lv] for r in per_judge.values()) / n for lv in LEVELS}
    return {
        "judges": sorted(per_judge),
        "judge_digests": sorted(str(r["judge_digest"]) for r in per_judge.values()),
        "annotations": sum(r["annotations"] for r in per_judge.values()) / n,
        "annotations_by_level": levels,
        "rubric": sum(r["rubric"] for r in per_judge.values()) / n,
        "rubric_by_level": {lv: sum(r["rubric_by_level"][lv] for r in per_judge.values()) / n for lv in LEVELS},
    }
