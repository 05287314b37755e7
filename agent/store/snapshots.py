"""Typed readers of what a run stores per unit, and of the story target in its configuration.

The store keeps states, step records and configurations as JSON, so that any pipeline can
commit what it needs; everything that reads them across a layer (the CLI, the evaluation,
the pipelines resuming) goes through these types instead of string keys. Each reader is
versioned by tolerance: it accepts the shape written by every earlier fabula (fields added
later have defaults, unknown fields are kept), which ``tests/test_legacy_runs.py`` checks on
databases written by d73c811.
"""

from __future__ import annotations

import hashlib
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field

from agent.limits import DEFAULT_PAGE_WORDS


class Record(BaseModel):
    """A stored JSON object read leniently: missing fields default, extra fields are kept."""

    model_config = ConfigDict(extra="allow", frozen=True)

    @classmethod
    def read(cls, raw: Any) -> Self:
        """The record from a stored value (``None`` or a non-object gives the empty record)."""
        return cls.model_validate(raw if isinstance(raw, dict) else {})

    def stored(self) -> dict[str, Any]:
        """The JSON to commit: the fields that were set (so each pipeline keeps its own shape)."""
        return self.model_dump(mode="json", exclude_unset=True)


class NarrativeSnapshot(Record):
    """NstAgent's state ``(C, P, F)`` as stored: characters by name, keyed events and requirements."""

    characters: dict[str, dict[str, Any]] = Field(default_factory=dict)
    past_events: dict[str, Any] = Field(default_factory=dict)
    future_requirements: dict[str, Any] = Field(default_factory=dict)


class ChapterSnapshot(Record):
    """The state committed with a chapter by NstAgent, RollSum or Direct."""

    narrative: dict[str, Any] | None = None
    """NstAgent's narrative state (None for --no-state and the baselines)."""
    tokens_per_word: float | None = None
    chapter: dict[str, Any] = Field(default_factory=dict)
    """The chapter's statistics: attempts, first_attempt_pass, words, target, tools, tokens."""
    summary: str | None = None
    """RollSum's story-so-far summary."""

    def state(self) -> NarrativeSnapshot | None:
        return NarrativeSnapshot.read(self.narrative) if self.narrative is not None else None

    @property
    def first_attempt_pass(self) -> bool | None:
        value = self.chapter.get("first_attempt_pass")
        return value if isinstance(value, bool) else None


class StepState(Record):
    """The state committed with a Magnet (or single-baseline) timestep."""

    world: dict[str, Any] | None = None
    goal: str | None = None
    goals: list[dict[str, Any]] = Field(default_factory=list)
    words: int = 0
    narrations: int = 0
    finished: bool = False
    finish_reason: str | None = None


class StepRecord(Record):
    """What happened in one Magnet timestep (the ``steps`` table's record)."""

    step: int = 0
    goal: str | None = None
    words_total: int = 0
    commits: list[dict[str, Any]] = Field(default_factory=list)
    """World writes: ``subject``/``attribute`` since #9 (a flat ``key`` before)."""
    goal_event: dict[str, Any] | None = None
    wall_s: float | None = None
    selected: list[str] = Field(default_factory=list)
    unselected: list[str] = Field(default_factory=list)
    rejected_updates: list[dict[str, Any]] = Field(default_factory=list)
    failures: list[dict[str, Any]] = Field(default_factory=list)
    """Model calls that failed after their retries, and what the step did instead."""
    chapter: int | None = None
    """The chapter the step belongs to (None: the story has no chapters, or an older run)."""


class RunTarget(BaseModel):
    """What a run was asked to write, read from any pipeline's stored configuration (a run's
    target as the store reads it; ``agent.nst.config.StoryTarget`` is NstAgent's settings)."""

    model_config = ConfigDict(frozen=True)

    prompt: str
    prompt_id: str | None = None
    words: int | None = None

    @classmethod
    def of(cls, config: dict[str, Any]) -> RunTarget:
        """NstAgent family: ``prompt``/``words``; Magnet family: the story definition's
        ``target_words`` (older shapes: ``words``, or ``pages`` x ``page_words``)."""
        story = config.get("story")
        if isinstance(story, dict):
            parts = [story.get("title", ""), story.get("genre", ""), story.get("goal", ""), story.get("premise", "")]
            return cls(prompt="\n".join(str(p) for p in parts if p), words=_magnet_words(story))
        words = config.get("words")
        prompt_id = config.get("prompt_id")
        return cls(
            prompt=str(config.get("prompt", "")),
            prompt_id=None if prompt_id is None else str(prompt_id),
            words=int(words) if isinstance(words, int | float) and words else None,
        )

    @property
    def key(self) -> str:
        """What pairs two runs: the prompt-set id if any, else a hash of the prompt text."""
        if self.prompt_id is not None:
            return f"id:{self.prompt_id}"
        return "sha256:" + hashlib.sha256(self.prompt.encode("utf-8")).hexdigest()[:16]


def _magnet_words(story: dict[str, Any]) -> int | None:
    for key in ("target_words", "words"):
        value = story.get(key)
        if isinstance(value, int | float) and value > 0:
            return int(value)
    pages = story.get("pages")
    if isinstance(pages, int | float) and pages > 0:
        return round(float(pages) * int(story.get("page_words") or DEFAULT_PAGE_WORDS))
    return None


class WorldTable:
    """A Magnet step's world variables as stored, in either format, under flat keys.

    The (subject, attribute) format (``world["format"]`` set) keys a world variable by its
    attribute and a character's as ``Subject.attribute``; the flat format written before it
    keeps its stored keys. The store, the view and ``fabula edit`` read and set variables through
    this one reader, so none of them needs the Magnet pipeline."""

    def __init__(self, world: dict[str, Any]) -> None:
        self.world = world
        self.nested = bool(world.get("format"))

    @classmethod
    def of(cls, state: Any) -> WorldTable | None:
        world = state.get("world") if isinstance(state, dict) else None
        if not isinstance(world, dict) or not isinstance(world.get("variables"), dict):
            return None
        return cls(world)

    def items(self) -> dict[str, dict[str, Any]]:
        """Flat key -> the stored record (value, step, by, ...)."""
        variables = self.world["variables"]
        if not self.nested:
            return {k: v for k, v in variables.items() if isinstance(v, dict)}
        return {
            (attribute if subject == "world" else f"{subject}.{attribute}"): record
            for subject, attributes in variables.items()
            if isinstance(attributes, dict)
            for attribute, record in attributes.items()
            if isinstance(record, dict)
        }

    def set(self, key: str, value: Any, *, step: int, by: str) -> None:
        """Set (or add) the variable ``key`` names, in the format the state already has."""
        old = self.items().get(key)
        if not self.nested:
            self.world["variables"][key] = {**(old or {"concerns": "world"}), "value": value, "step": step, "by": by}
            return
        subject, _, attribute = key.rpartition(".") if "." in key else ("world", "", key)
        table = self.world["variables"].setdefault(subject, {})
        table[attribute] = {**(old or {"secret": False}), "value": value, "step": step, "by": by}
