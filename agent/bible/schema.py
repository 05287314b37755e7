"""The JSON Schema of a story bible's one shape (what ``agent.bible.read.read_bible`` returns).

A TOML or YAML bible is written in this shape (a plain string is accepted wherever an entry is, and
gets a key made from its words); ``docs/story-bible.schema.json`` is its exported copy, kept in sync
by a test, for editors that validate YAML or TOML against a schema.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

KEY_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
DATE_PATTERN = r"^-?\d{1,4}(-\d{2}(-\d{2})?)?$"


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Character(_Closed):
    name: str = Field(min_length=1)
    description: str = ""
    facts: dict[str, str] = Field(
        default_factory=dict, description="canon facts: key (lower_snake_case) -> value; no update may change them"
    )


class Place(_Closed):
    name: str = Field(min_length=1)
    description: str = ""


class Event(_Closed):
    key: str = Field(pattern=KEY_PATTERN)
    event: str = Field(min_length=1)
    date: str | None = Field(None, pattern=DATE_PATTERN, description="YYYY, YYYY-MM or YYYY-MM-DD")


class Requirement(_Closed):
    key: str = Field(pattern=KEY_PATTERN)
    description: str = Field(min_length=1)


class StoryBible(_Closed):
    """A writer's world: characters with canon facts, places, world rules, a timeline of past events,
    and what must happen in the story."""

    characters: list[Character] = Field(default_factory=list)
    places: list[Place] = Field(default_factory=list)
    rules: list[str] = Field(default_factory=list)
    timeline: list[Event] = Field(default_factory=list)
    must_happen: list[Requirement] = Field(default_factory=list)


def bible_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of :class:`StoryBible`."""
    schema = StoryBible.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def schema_text() -> str:
    return json.dumps(bible_schema(), indent=2, ensure_ascii=False) + "\n"
