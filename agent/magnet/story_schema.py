"""The story definition format as a JSON Schema, for editors that complete and check TOML files
(``fabula story schema``; e.g. Taplo or VS Code's Even Better TOML read a ``#:schema`` line).

The validator in ``definition.py`` stays the authority (it reports every problem as one line
with the character's name, and checks what a schema cannot: relationships to known names,
slug clashes, the focal character); a test keeps both on the same set of keys and checks that
every example validates against this schema.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from agent.magnet.definition import DEFAULT_PAGE_WORDS, KEY_RULE, POVS, TENSES

Key = Annotated[str, StringConstraints(pattern=KEY_RULE.pattern)]
Scalar = str | int | float | bool
Texts = str | Annotated[list[Annotated[str, StringConstraints(min_length=1)]], Field(min_length=1)]
Variables = dict[Key, Scalar]


class _Format(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CharacterFormat(_Format):
    """One ``[[characters]]`` table: a persona agent."""

    model_config = ConfigDict(extra="forbid", title="Character")

    name: str = Field(min_length=1, description="Unique; not 'world'. The subject of this character's variables.")
    role: str = Field(min_length=1, description="The character's part in the story.")
    description: str = Field(min_length=1)
    personality: str = Field(min_length=1)
    goals: Texts = Field(description="One goal or a non-empty list of goals.")
    location: str = Field(min_length=1, description="Starting location; the state attribute 'location' after that.")
    abilities: Texts = Field(default_factory=list)
    relationships: dict[str, str] = Field(
        default_factory=dict,
        description="Other character's name = relationship. "
        "Becomes the attribute relationship_with_<name> (mutable state).",
    )
    state: Variables = Field(default_factory=dict, description="Public variables of this character (snake_case).")
    secrets: Variables = Field(
        default_factory=dict,
        description="Private variables: seen by this character, the "
        "critic, the narrator and the goal generator only; never by another character.",
    )


class StoryFormat(_Format):
    """A Magnet story definition (TOML)."""

    model_config = ConfigDict(extra="forbid", title="fabula Magnet story definition")

    title: str = Field(min_length=1)
    genre: str = Field(min_length=1)
    goal: str = Field(min_length=1, description="The high-level story goal (the first goal).")
    premise: str = ""
    pages: float | None = Field(None, gt=0, description="Target length in pages (or give words, not both).")
    words: int | None = Field(None, gt=0, description="Target length in words (or give pages, not both).")
    page_words: int = Field(DEFAULT_PAGE_WORDS, gt=0)
    world: Variables = Field(default_factory=dict, description="Public world variables; seen by every role.")
    secrets: Variables = Field(
        default_factory=dict, description="Hidden world variables: never shown to a character agent."
    )
    characters: list[CharacterFormat] = Field(min_length=1)
    pov: Literal[POVS] = Field("third-omniscient", description="Point of view.")  # type: ignore[valid-type]
    focal: str = Field("", description="The focal character's name (needed for first and third-limited).")
    tense: Literal[TENSES] = "past"  # type: ignore[valid-type]
    style: str = Field("", description="Free notes on style for the narrator.")
    beats: Texts = Field(default_factory=list, description="Ordered plot points each new goal must lead through.")
    ending: str = Field("", description="The intended resolution; the concluding goal aims at it.")
    chapter_every: Annotated[int, Field(ge=1)] | Literal["goal"] | None = Field(
        None, description="A new chapter every N steps, or at each goal change ('goal')."
    )


def story_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a story definition."""
    schema = StoryFormat.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    _closed(schema)
    return schema


def _closed(node: Any) -> None:
    """Variable tables admit only snake_case names: pydantic writes ``patternProperties`` but
    leaves other names open, so close them (``additionalProperties: false``)."""
    if isinstance(node, dict):
        if "patternProperties" in node:
            node["additionalProperties"] = False
        for value in node.values():
            _closed(value)
    elif isinstance(node, list):
        for value in node:
            _closed(value)
