"""The story definition a user writes in TOML, and its validation.

Every problem is one line naming the file, the field (and the character) and what is wrong,
because a user edits this file by hand and a typo in a key must not pass silently (unknown
keys are refused). All problems are reported at once (up to ``MAX_PROBLEMS``), so one edit
fixes them all. The format is also exported as a JSON Schema (``agent.magnet.story_schema``).
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from agent.errors import InputError
from agent.limits import DEFAULT_PAGE_WORDS, MAX_PAGE_WORDS, MAX_PAGES, MAX_WORDS
from agent.text import read_capped

SCALARS = (str, int, float, bool)
MAX_PROBLEMS = 10
MAX_NAME_CHARS = 80
"""A character's name is a name: at most this many characters, printable, on one line."""
MAX_CHARACTERS = 64
"""Every character's card is in every prompt of a step: more than this is not a story the model can hold."""
KEY_RULE = re.compile(r"^[a-z][a-z0-9_]*$")
"""Variable names: snake_case, as the critic's grammar writes them."""

POVS = ("first", "third-limited", "third-omniscient")
TENSES = ("past", "present")
RESERVED_ATTRIBUTES = ("location",)
RELATION_PREFIX = "relationship_with_"

STORY_KEYS = {
    "title",
    "genre",
    "goal",
    "pages",
    "words",
    "page_words",
    "world",
    "secrets",
    "characters",
    "premise",
    "pov",
    "focal",
    "tense",
    "style",
    "beats",
    "ending",
    "chapter_every",
}
CHARACTER_KEYS = {
    "name",
    "role",
    "description",
    "personality",
    "goals",
    "location",
    "abilities",
    "relationships",
    "state",
    "secrets",
}


class DefinitionError(InputError, ValueError):
    """A story definition that cannot be used; one line per problem, for the user."""

    one_line_per_problem = True


@dataclass(frozen=True)
class Character:
    """One persona: the attributes the paper gives every character agent, plus its secrets."""

    name: str
    role: str
    description: str
    personality: str
    goals: list[str]
    location: str
    abilities: list[str]
    relationships: dict[str, str]
    state: dict[str, Any] = field(default_factory=dict)
    secrets: dict[str, Any] = field(default_factory=dict)

    def persona(self, *, location: Any = None, relationships: dict[str, Any] | None = None) -> str:
        """The persona as prompt text. ``location`` and ``relationships``: the world graph's at
        this step (the definition's are only the starting values)."""
        rels = self.relationships if relationships is None else relationships
        lines = [
            f"Name: {self.name}",
            f"Role: {self.role}",
            f"Description: {self.description}",
            f"Personality: {self.personality}",
            f"Goals: {'; '.join(self.goals) or '-'}",
            f"Location: {self.location if location is None else location}",
            f"Abilities: {'; '.join(self.abilities) or '-'}",
        ]
        if rels:
            lines.append("Relationships: " + "; ".join(f"{k}: {v}" for k, v in rels.items()))
        return "\n".join(lines)


@dataclass(frozen=True)
class StoryDefinition:
    """What the user asked for: premise, characters, initial world, length and writer control."""

    title: str
    genre: str
    goal: str
    characters: list[Character]
    target_words: int
    page_words: int = DEFAULT_PAGE_WORDS
    premise: str = ""
    world: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    world_secrets: dict[str, Any] = field(default_factory=dict)
    """Hidden world variables (the TOML's top-level ``[secrets]``): only the critic, narrator and
    goal generator see them."""
    pov: str = "third-omniscient"
    focal: str = ""
    tense: str = "past"
    style: str = ""
    beats: list[str] = field(default_factory=list)
    ending: str = ""
    chapter_every: int | str | None = None
    """A new chapter every N steps, or ``"goal"``: at each goal change; ``None``: no chapters."""

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
        """From a stored configuration (fields added later default, so old runs still load)."""
        chars = [Character(**c) for c in data["characters"]]
        return cls(**{**data, "characters": chars})

    def with_length(
        self, *, pages: float | None = None, words: int | None = None, page_words: int | None = None
    ) -> StoryDefinition:
        """The same story at another length (command-line overrides), validated like the file."""
        where = self.source or "command line"
        pw = _positive_int(page_words, where, "page_words") if page_words is not None else self.page_words
        if pages is not None and words is not None:
            raise DefinitionError(f"{where}: give --pages or --words, not both")
        if words is not None:
            total = _positive_int(words, where, "words")
        elif pages is not None:
            total = round(_positive_number(pages, where, "pages") * pw)
            if total < 1:
                raise DefinitionError(f"{where}: --pages {pages:g} is less than one word (at {pw} words a page)")
        elif page_words is not None:
            total = round(self.target_words / self.page_words * pw)
        else:
            return self
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
    except RecursionError:
        raise DefinitionError(f"{where}: not a story definition (arrays or tables nested too deeply)") from None
    return parse_definition(data, where)


class _Problems:
    """Collects one line per problem; raises them together at the end."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.lines: list[str] = []

    def add(self, at: str, message: str, character: str | None = None) -> None:
        who = f" (character {character})" if character else ""
        self.lines.append(f"{self.where}: {at}: {message}{who}" if at else f"{self.where}: {message}{who}")

    def check(self) -> None:
        if self.lines:
            shown = self.lines[:MAX_PROBLEMS]
            if len(self.lines) > MAX_PROBLEMS:
                shown.append(f"{self.where}: ... and {len(self.lines) - MAX_PROBLEMS} more problem(s)")
            raise DefinitionError("\n".join(shown))


def parse_definition(data: dict[str, Any], where: str = "story definition") -> StoryDefinition:
    """Validate a parsed TOML document; ``where`` names the file in every message."""
    p = _Problems(where)
    _no_unknown(data, STORY_KEYS, p, "")
    title = _text(data, "title", p, "")
    genre = _text(data, "genre", p, "")
    goal = _text(data, "goal", p, "")
    premise = _text(data, "premise", p, "", required=False)
    target, page_words = _length(data, p)
    world = _variables(data.get("world", {}), p, "world")
    world_secrets = _variables(data.get("secrets", {}), p, "secrets")
    for key in sorted(set(world) & set(world_secrets)):
        p.add(f"secrets.{key}", "clashes with the public world variable of the same name")
    characters = data.get("characters")
    parsed: list[Character] = []
    if characters is None or (isinstance(characters, list) and not characters):
        p.add("characters", "no characters defined (add [[characters]] tables)")
    elif not isinstance(characters, list) or not all(isinstance(c, dict) for c in characters):
        p.add("characters", "must be an array of tables ([[characters]])")
    elif len(characters) > MAX_CHARACTERS:
        p.add("characters", f"{len(characters)} characters; a story has at most {MAX_CHARACTERS}")
    else:
        parsed = [_character(item, p, f"characters[{i}]") for i, item in enumerate(characters)]
    _names(parsed, p)
    _world_clashes(world, world_secrets, parsed, p)
    controls = _controls(data, parsed, p)
    p.check()
    assert target is not None and page_words is not None
    return StoryDefinition(
        title=title,
        genre=genre,
        goal=goal,
        characters=parsed,
        target_words=target,
        page_words=page_words,
        premise=premise,
        world=world,
        source=where,
        world_secrets=world_secrets,
        **controls,
    )


def _length(data: dict[str, Any], p: _Problems) -> tuple[int | None, int | None]:
    try:
        page_words = _positive_int(data.get("page_words", DEFAULT_PAGE_WORDS), p.where, "page_words")
        if "pages" in data and "words" in data:
            raise DefinitionError(f"{p.where}: pages and words: give one target length, not both")
        if "words" in data:
            return _positive_int(data["words"], p.where, "words"), page_words
        if "pages" in data:
            target = round(_positive_number(data["pages"], p.where, "pages") * page_words)
            if target < 1:
                raise DefinitionError(f"{p.where}: pages: {data['pages']!r} is less than one word")
            return target, page_words
        raise DefinitionError(f"{p.where}: pages: missing (the target length, or give words)")
    except DefinitionError as exc:
        p.lines.append(str(exc))
        return None, None


def _character(item: dict[str, Any], p: _Problems, at: str) -> Character:
    raw_name = item.get("name")
    who = raw_name if isinstance(raw_name, str) and raw_name.strip() else None
    before = len(p.lines)
    _no_unknown(item, CHARACTER_KEYS, p, at + ".", who)
    name = _text(item, "name", p, at + ".")
    if len(name) > MAX_NAME_CHARS:
        p.add(f"{at}.name", f"is {len(name)} characters long; a name has at most {MAX_NAME_CHARS}")
        name, who = name[:MAX_NAME_CHARS], None
    if any(not c.isprintable() for c in name):
        p.add(f"{at}.name", f"{name!r} holds control characters; a name is printable text")
        name, who = "".join(c for c in name if c.isprintable()), None
    if name.casefold() == "world":
        p.add(f"{at}.name", "'world' is reserved for the world node")
    relationships = item.get("relationships", {})
    if not isinstance(relationships, dict) or not all(isinstance(v, str) for v in relationships.values()):
        p.add(f"{at}.relationships", 'must be a table of name = "relationship"', who)
        relationships = {}
    goals = _text_list(item, "goals", p, at + ".", who=who)
    if "goals" in item and not goals and len(p.lines) == before:
        p.add(f"{at}.goals", "is empty (give at least one goal)", who)
    state = _variables(item.get("state", {}), p, at + ".state", who)
    secrets = _variables(item.get("secrets", {}), p, at + ".secrets", who)
    for key in state:
        if key in RESERVED_ATTRIBUTES or key.startswith(RELATION_PREFIX):
            p.add(f"{at}.state.{key}", f"is reserved (set it with the {key.split('_with_')[0]} field)", who)
    for key in sorted(set(secrets) & (set(state) | set(RESERVED_ATTRIBUTES))):
        p.add(f"{at}.secrets.{key}", "clashes with a public variable of the same name", who)
    return Character(
        name=name,
        role=_text(item, "role", p, at + ".", who=who),
        description=_text(item, "description", p, at + ".", who=who),
        personality=_text(item, "personality", p, at + ".", who=who),
        goals=goals,
        location=_text(item, "location", p, at + ".", who=who),
        abilities=_text_list(item, "abilities", p, at + ".", required=False, who=who),
        relationships=dict(relationships),
        state=state,
        secrets=secrets,
    )


def slug(name: str) -> str:
    """A name as a snake_case word (the world graph's rule, kept here so imports flow downward)."""
    out = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    return out if out and out[0].isalpha() else f"c_{out}"


def _names(parsed: list[Character], p: _Problems) -> None:
    seen: dict[str, int] = {}
    slugs: dict[str, int] = {}
    for i, char in enumerate(parsed):
        if not char.name:
            continue
        key = char.name.casefold()
        if key in seen:
            p.add(f"characters[{i}].name", f"duplicate name {char.name!r} (also characters[{seen[key]}])")
            continue
        seen[key] = i
        s = slug(char.name)
        if s in slugs:
            p.add(
                f"characters[{i}].name",
                f"{char.name!r} reduces to the same name {s!r} as {parsed[slugs[s]].name!r} (characters[{slugs[s]}])",
            )
        slugs.setdefault(s, i)
    names = {c.name for c in parsed}
    for i, char in enumerate(parsed):
        for other in char.relationships:
            if other not in names:
                p.add(
                    f"characters[{i}].relationships.{other}",
                    f"unknown character {other!r} (known: {', '.join(sorted(names))})",
                    char.name,
                )
            elif other == char.name:
                p.add(f"characters[{i}].relationships.{other}", "a character cannot relate to itself", char.name)


def _world_clashes(world: dict[str, Any], secrets: dict[str, Any], parsed: list[Character], p: _Problems) -> None:
    """A world variable named after a character's (``lucia_location``) would be read as hers."""
    prefixes = {slug(c.name) + "_": c for c in reversed(parsed) if c.name}
    for table, values in (("world", world), ("secrets", secrets)):
        for key in values:
            for prefix, char in reversed(prefixes.items()):
                if key.startswith(prefix):
                    p.add(
                        f"{table}.{key}",
                        f"clashes with {char.name}'s variables (a world variable may not start "
                        f"with {prefix!r}; put it in that character's state)",
                    )


def _controls(data: dict[str, Any], parsed: list[Character], p: _Problems) -> dict[str, Any]:
    """Writer control: point of view, tense, style, beats, intended ending, chapters."""
    out: dict[str, Any] = {}
    pov = data.get("pov", "third-omniscient")
    if pov not in POVS:
        p.add("pov", f"must be one of {', '.join(POVS)}, not {pov!r}")
    out["pov"] = pov if pov in POVS else "third-omniscient"
    focal = _text(data, "focal", p, "", required=False)
    names = {c.name for c in parsed}
    if pov in ("first", "third-limited") and not focal:
        p.add("focal", f"missing: pov {pov!r} needs the focal character's name")
    elif focal and focal not in names and names:
        p.add("focal", f"unknown character {focal!r} (known: {', '.join(sorted(names))})")
    out["focal"] = focal
    tense = data.get("tense", "past")
    if tense not in TENSES:
        p.add("tense", f"must be one of {', '.join(TENSES)}, not {tense!r}")
    out["tense"] = tense if tense in TENSES else "past"
    out["style"] = _text(data, "style", p, "", required=False)
    out["beats"] = _text_list(data, "beats", p, "", required=False)
    out["ending"] = _text(data, "ending", p, "", required=False)
    every = data.get("chapter_every")
    if every is not None and every != "goal" and (isinstance(every, bool) or not isinstance(every, int) or every < 1):
        p.add("chapter_every", f'must be a positive whole number of steps or "goal", not {every!r}')
        every = None
    out["chapter_every"] = every
    return out


def _no_unknown(table: dict[str, Any], allowed: set[str], p: _Problems, prefix: str, who: str | None = None) -> None:
    for key in sorted(set(table) - allowed):
        p.add(f"{prefix}{key}", f"unknown key (a typo? allowed: {', '.join(sorted(allowed))})", who)


def _text(
    table: dict[str, Any], key: str, p: _Problems, prefix: str, *, required: bool = True, who: str | None = None
) -> str:
    value = table.get(key)
    if value is None:
        if required:
            p.add(f"{prefix}{key}", "missing", who)
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        p.add(f"{prefix}{key}", "must be non-empty text", who)
        return ""
    return " ".join(value.split())


def _text_list(
    table: dict[str, Any], key: str, p: _Problems, prefix: str, *, required: bool = True, who: str | None = None
) -> list[str]:
    value = table.get(key)
    if value is None:
        if required:
            p.add(f"{prefix}{key}", "missing", who)
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        p.add(f"{prefix}{key}", "must be text or a list of non-empty texts", who)
        return []
    return [" ".join(v.split()) for v in value]


def _variables(value: Any, p: _Problems, at: str, who: str | None = None) -> dict[str, Any]:
    if not isinstance(value, dict):
        p.add(at, "must be a table of variable = value", who)
        return {}
    out = {}
    for key, val in value.items():
        if not KEY_RULE.match(key):
            p.add(f"{at}.{key}", "variable names are snake_case (lower-case letters, digits, _; a letter first)", who)
        elif not isinstance(val, SCALARS):
            p.add(f"{at}.{key}", "must be text, a number or true/false", who)
        else:
            out[key] = val
    return out


LIMITS = {"words": MAX_WORDS, "pages": MAX_PAGES, "page_words": MAX_PAGE_WORDS}
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
