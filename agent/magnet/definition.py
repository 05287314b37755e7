"""The story definition a user writes in TOML, and its validation.

Every refusal is one line naming the file, the field and the problem, because a user edits
this file by hand and a typo in a key must not pass silently (unknown keys are refused).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agent.errors import InputError
from agent.text import read_capped

DEFAULT_PAGE_WORDS = 500
SCALARS = (str, int, float, bool)

STORY_KEYS = {"title", "genre", "goal", "pages", "words", "page_words", "world", "characters", "premise"}
CHARACTER_KEYS = {"name", "role", "description", "personality", "goals", "location", "abilities", "relationships",
                  "state"}


class DefinitionError(InputError, ValueError):
    """A story definition that cannot be used; the message is one line for the user."""


@dataclass(frozen=True)
class Character:
    """One persona: the attributes the paper gives every character agent."""

    name: str
    role: str
    description: str
    personality: str
    goals: list[str]
    location: str
    abilities: list[str]
    relationships: dict[str, str]
    state: dict[str, Any] = field(default_factory=dict)

    def persona(self) -> str:
        """The persona as prompt text (stable: always the same for one character)."""
        lines = [f"Name: {self.name}", f"Role: {self.role}", f"Description: {self.description}",
                 f"Personality: {self.personality}", f"Goals: {'; '.join(self.goals) or '-'}",
                 f"Location: {self.location}", f"Abilities: {'; '.join(self.abilities) or '-'}"]
        if self.relationships:
            lines.append("Relationships: " + "; ".join(f"{k}: {v}" for k, v in self.relationships.items()))
        return "\n".join(lines)


@dataclass(frozen=True)
class StoryDefinition:
    """What the user asked for: premise, characters, initial world, target length."""

    title: str
    genre: str
    goal: str
    characters: list[Character]
    target_words: int
    page_words: int = DEFAULT_PAGE_WORDS
    premise: str = ""
    world: dict[str, Any] = field(default_factory=dict)
    source: str = ""

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.characters]

    def character(self, name: str) -> Character:
        for c in self.characters:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StoryDefinition:
        chars = [Character(**c) for c in data["characters"]]
        return cls(**{**data, "characters": chars})

    def with_length(self, *, pages: float | None = None, words: int | None = None,
                    page_words: int | None = None) -> StoryDefinition:
        """The same story at another length (command-line overrides), validated like the file."""
        where = self.source or "command line"
        pw = _positive_int(page_words, where, "page_words") if page_words is not None else self.page_words
        if pages is not None and words is not None:
            raise DefinitionError(f"{where}: give --pages or --words, not both")
        if words is not None:
            total = _positive_int(words, where, "words")
        elif pages is not None:
            total = round(_positive_number(pages, where, "pages") * pw)
        elif page_words is not None:
            total = round(self.target_words / self.page_words * pw)
        else:
            return self
        from dataclasses import replace

        return replace(self, target_words=total, page_words=pw)


MAX_FILE_BYTES = 1 << 20
"""A story definition is a few KiB; anything over a MiB is the wrong file."""


def load_definition(path: str | Path) -> StoryDefinition:
    """Read and validate a story definition TOML file."""
    path = Path(path)
    where = str(path)
    try:
        raw = read_capped(path, MAX_FILE_BYTES)
    except OSError as exc:
        raise DefinitionError(f"{where}: cannot read the story definition ({exc.strerror or exc})") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DefinitionError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise DefinitionError(f"{where}: not valid TOML ({exc})") from exc
    return parse_definition(data, where)


def parse_definition(data: dict[str, Any], where: str = "story definition") -> StoryDefinition:
    """Validate a parsed TOML document; ``where`` names the file in every message."""
    _no_unknown(data, STORY_KEYS, where, "")
    title = _text(data, "title", where, "")
    genre = _text(data, "genre", where, "")
    goal = _text(data, "goal", where, "")
    premise = _text(data, "premise", where, "", required=False)
    page_words = _positive_int(data.get("page_words", DEFAULT_PAGE_WORDS), where, "page_words")
    if "pages" in data and "words" in data:
        raise DefinitionError(f"{where}: pages and words: give one target length, not both")
    if "words" in data:
        target = _positive_int(data["words"], where, "words")
    elif "pages" in data:
        target = round(_positive_number(data["pages"], where, "pages") * page_words)
        if target < 1:
            raise DefinitionError(f"{where}: pages: {data['pages']!r} is less than one word")
    else:
        raise DefinitionError(f"{where}: pages: missing (the target length, or give words)")
    world = _variables(data.get("world", {}), where, "world")
    characters = data.get("characters")
    if characters is None or (isinstance(characters, list) and not characters):
        raise DefinitionError(f"{where}: characters: no characters defined (add [[characters]] tables)")
    if not isinstance(characters, list) or not all(isinstance(c, dict) for c in characters):
        raise DefinitionError(f"{where}: characters: must be an array of tables ([[characters]])")
    parsed: list[Character] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(characters):
        char = _character(item, where, f"characters[{i}]")
        key = char.name.casefold()
        if key in seen:
            raise DefinitionError(f"{where}: characters[{i}].name: duplicate name {char.name!r} "
                                  f"(also characters[{seen[key]}])")
        seen[key] = i
        parsed.append(char)
    names = {c.name for c in parsed}
    for i, char in enumerate(parsed):
        for other in char.relationships:
            if other not in names:
                raise DefinitionError(f"{where}: characters[{i}].relationships.{other}: unknown character "
                                      f"{other!r} (known: {', '.join(sorted(names))})")
            if other == char.name:
                raise DefinitionError(f"{where}: characters[{i}].relationships.{other}: a character cannot "
                                      "relate to itself")
    return StoryDefinition(title=title, genre=genre, goal=goal, characters=parsed, target_words=target,
                           page_words=page_words, premise=premise, world=world, source=where)


def _character(item: dict[str, Any], where: str, at: str) -> Character:
    _no_unknown(item, CHARACTER_KEYS, where, at + ".")
    name = _text(item, "name", where, at + ".")
    if name.casefold() == "world":
        raise DefinitionError(f"{where}: {at}.name: 'world' is reserved for the world node")
    relationships = item.get("relationships", {})
    if not isinstance(relationships, dict) or not all(isinstance(v, str) for v in relationships.values()):
        raise DefinitionError(f"{where}: {at}.relationships: must be a table of name = \"relationship\"")
    return Character(
        name=name,
        role=_text(item, "role", where, at + "."),
        description=_text(item, "description", where, at + "."),
        personality=_text(item, "personality", where, at + "."),
        goals=_text_list(item, "goals", where, at + "."),
        location=_text(item, "location", where, at + "."),
        abilities=_text_list(item, "abilities", where, at + ".", required=False),
        relationships=dict(relationships),
        state=_variables(item.get("state", {}), where, at + ".state"),
    )


def _no_unknown(table: dict[str, Any], allowed: set[str], where: str, prefix: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise DefinitionError(f"{where}: {prefix}{unknown[0]}: unknown key (a typo? allowed: "
                              f"{', '.join(sorted(allowed))})")


def _text(table: dict[str, Any], key: str, where: str, prefix: str, *, required: bool = True) -> str:
    value = table.get(key)
    if value is None:
        if required:
            raise DefinitionError(f"{where}: {prefix}{key}: missing")
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise DefinitionError(f"{where}: {prefix}{key}: must be non-empty text")
    return " ".join(value.split())


def _text_list(table: dict[str, Any], key: str, where: str, prefix: str, *, required: bool = True) -> list[str]:
    value = table.get(key)
    if value is None:
        if required:
            raise DefinitionError(f"{where}: {prefix}{key}: missing")
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise DefinitionError(f"{where}: {prefix}{key}: must be text or a list of non-empty texts")
    return [" ".join(v.split()) for v in value]


def _variables(value: Any, where: str, at: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DefinitionError(f"{where}: {at}: must be a table of variable = value")
    for key, val in value.items():
        if not isinstance(val, SCALARS):
            raise DefinitionError(f"{where}: {at}.{key}: must be text, a number or true/false")
    return dict(value)


LIMITS = {"words": 300_000, "pages": 600, "page_words": 5_000}
"""Upper bounds of the length fields: a longer story is a typo, not a plan (NstAgent's own bound)."""


def _positive_number(value: Any, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DefinitionError(f"{where}: {key}: must be a number, not {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise DefinitionError(f"{where}: {key}: must be positive, not {value!r}")
    if value > LIMITS.get(key, math.inf):
        raise DefinitionError(f"{where}: {key}: at most {LIMITS[key]}, not {value!r}")
    return float(value)


def _positive_int(value: Any, where: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise DefinitionError(f"{where}: {key}: must be a whole number, not {value!r}")
    if value <= 0:
        raise DefinitionError(f"{where}: {key}: must be positive, not {value!r}")
    if value > LIMITS.get(key, math.inf):
        raise DefinitionError(f"{where}: {key}: at most {LIMITS[key]}, not {value!r}")
    return value
