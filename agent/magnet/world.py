"""The structured world state: variables addressed as (subject, attribute), views, commit rule.

A variable belongs to a *subject*: the root ``world`` or one character (by its name), and is
named by a snake_case *attribute* inside it. ``("Lucia Ashcombe", "location")`` is Lucia's
location and no one else's; there is no flat key to misspell, so an overwrite hits the same
variable by construction. Relationships are state too: ``relationship_with_<slug>`` of the
character that holds them (mutable, with history, like any variable).

Private knowledge: a variable may be *secret*. A character agent sees its own variables
(secrets included), the public variables of the characters it currently relates to, and
the public world variables; the critic, narrator and goal generator see everything. An
update of a secret variable keeps it secret.

Commits follow the paper: the selected actions' updates are applied in the narrator's
order, a new variable is inserted, an existing one overwritten; nothing else writes to the
state. Each applied write is returned as a :class:`Commit` for the step record.

Older stored state is converted by :meth:`WorldGraph.from_json` (docs/design/magnet-world.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from agent.magnet.definition import RELATION_PREFIX, StoryDefinition, slug

WORLD = "world"
FORMAT = 2
LOCATION = "location"
MIN_REDACTED = 4
"""Secret text values shorter than this are not redacted from other text (they would match everywhere)."""
_NUMBER = re.compile(r"^-?\d{1,15}$")
_NO_RELATION = {"", "none", "no", "false", "null", "-"}


@dataclass(frozen=True)
class Update:
    """A proposed write, as the critic (or character, without a critic) states it."""

    subject: str
    attribute: str
    value: Any


@dataclass(frozen=True)
class Commit:
    """A write that landed: what it replaced, who caused it, at which step and why."""

    step: int
    order: int
    character: str
    subject: str
    attribute: str
    old: Any
    new: Any
    action: str
    secret: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Entry:
    """One variable as a role sees it."""

    subject: str
    attribute: str
    value: Any
    secret: bool


def coerce(value: Any) -> Any:
    """A model's string value as the scalar it spells: ``"true"`` -> True, ``"3"`` -> 3."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if _NUMBER.match(text):
        return int(text)
    return text


def attribute_name(text: str) -> str:
    """Any spelling of an attribute as snake_case: ``"Holding Back-Evidence"`` -> ``holding_back_evidence``."""
    return slug(text) if text.strip() else "value"


def relation_attribute(other: str) -> str:
    return RELATION_PREFIX + slug(other)


def _related_value(value: Any) -> bool:
    return value is not None and value is not False and str(value).strip().lower() not in _NO_RELATION


class WorldGraph:
    """The world state of one story. JSON round-trips through :meth:`to_json`/:meth:`from_json`."""

    def __init__(self, title: str, characters: dict[str, str], variables: dict[str, dict[str, dict[str, Any]]]) -> None:
        self.title = title
        self.characters = characters  # name -> role
        self.variables = variables  # subject -> attribute -> {"value", "step", "by", "secret"}
        for subject in (WORLD, *characters):
            self.variables.setdefault(subject, {})

    # -- building ------------------------------------------------------------------------
    @classmethod
    def from_definition(cls, story: StoryDefinition) -> WorldGraph:
        """The initial graph: world variables (public and hidden), each character's location,
        relationships, state and secrets."""
        variables: dict[str, dict[str, dict[str, Any]]] = {WORLD: {}}

        def put(subject: str, attribute: str, value: Any, secret: bool = False) -> None:
            variables.setdefault(subject, {})[attribute] = {"value": value, "step": 0, "by": None, "secret": secret}

        for key, value in story.world.items():
            put(WORLD, key, value)
        for key, value in story.world_secrets.items():
            put(WORLD, key, value, True)
        for char in story.characters:
            put(char.name, LOCATION, char.location)
            for other, label in char.relationships.items():
                put(char.name, relation_attribute(other), label)
            for key, value in char.state.items():
                put(char.name, key, value)
            for key, value in char.secrets.items():
                put(char.name, key, value, True)
        return cls(story.title, {c.name: c.role for c in story.characters}, variables)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "title": self.title,
            "characters": dict(self.characters),
            "variables": {s: {a: dict(v) for a, v in attrs.items()} for s, attrs in self.variables.items()},
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorldGraph:
        """Read any stored world: this format, or the flat-key one written before it."""
        if data.get("format") == FORMAT:
            variables = {
                s: {a: {"secret": False, **v} for a, v in attrs.items()} for s, attrs in data["variables"].items()
            }
            return cls(data["title"], dict(data["characters"]), variables)
        return cls._from_flat(data)

    @classmethod
    def _from_flat(cls, data: dict[str, Any]) -> WorldGraph:
        characters = dict(data.get("characters") or {})
        world = cls(str(data.get("title", "")), characters, {})
        for rel in data.get("relationships") or []:
            if rel.get("from") in characters and rel.get("to") in characters:
                world.variables[rel["from"]][relation_attribute(rel["to"])] = {
                    "value": rel.get("label", ""),
                    "step": 0,
                    "by": None,
                    "secret": False,
                }
        for key, var in (data.get("variables") or {}).items():
            subject, attribute = world.resolve(str(var.get("concerns", WORLD)), str(key))
            world.variables[subject][attribute] = {
                "value": var.get("value"),
                "step": var.get("step", 0),
                "by": var.get("by"),
                "secret": bool(var.get("secret", False)),
            }
        return world

    # -- addressing ----------------------------------------------------------------------
    def subject_of(self, text: str) -> str:
        """A subject as written (any case, or its slug) -> a character's name or ``world``."""
        if text in self.characters:
            return text
        wanted = slug(text)
        for name in self.characters:
            if slug(name) == wanted or name.casefold() == text.strip().casefold():
                return name
        return WORLD

    def resolve(self, subject: str, attribute: str) -> tuple[str, str]:
        """The variable an update means, whatever its spelling.

        The attribute is put in snake_case; a character's own name as a prefix is dropped
        (``lucia_ashcombe_location`` of Lucia is her ``location``), and another character's
        name as a prefix moves the write to that character (``hugo_ashcombe_in_debt`` is
        Hugo's ``in_debt``), so neither ever creates a second variable."""
        subject = self.subject_of(subject)
        attr = attribute_name(attribute)
        owners = sorted(self.characters, key=lambda n: -len(slug(n)))
        changed = True
        while changed:  # "lucia_lucia_mood" is still Lucia's mood
            changed = False
            for name in owners:
                prefix = slug(name) + "_"
                if attr.startswith(prefix) and len(attr) > len(prefix):
                    subject, attr, changed = name, attr[len(prefix) :], True
                    break
        return subject, attr

    def attributes(self, subject: str, *, viewer: str | None = None) -> list[str]:
        """The attributes of ``subject`` that ``viewer`` may see (``None``: every one)."""
        return [
            a
            for a, v in self.variables.get(subject, {}).items()
            if viewer is None or viewer == subject or not v.get("secret")
        ]

    def value(self, subject: str, attribute: str, default: Any = None) -> Any:
        return self.variables.get(subject, {}).get(attribute, {}).get("value", default)

    # -- views ---------------------------------------------------------------------------
    def relationships(self, name: str) -> dict[str, Any]:
        """``other -> label`` for each character ``name`` relates to now (from its state)."""
        out = {}
        for other in self.characters:
            value = self.value(name, relation_attribute(other))
            if other != name and _related_value(value):
                out[other] = value
        return out

    def related(self, name: str) -> list[str]:
        return list(self.relationships(name))

    def location(self, name: str) -> Any:
        return self.value(name, LOCATION)

    def entries(self, viewer: str | None = None) -> list[Entry]:
        """The variables ``viewer`` sees: the world's, then each character's in story order, each
        subject's in insertion order (the same order for every viewer, so the characters' prompts
        share their state as a prefix).

        ``None`` (the critic, narrator and goal generator): everything. A character: its own
        variables including secrets, the public variables of the characters it relates to
        now, and the public world variables; never another character's secrets."""
        if viewer is None:
            visible = [WORLD, *self.characters]
        else:
            related = set(self.related(viewer))
            visible = [WORLD, *[n for n in self.characters if n == viewer or n in related]]
        out = []
        for subject in visible:
            for attribute, var in self.variables.get(subject, {}).items():
                if viewer is not None and var.get("secret") and subject != viewer:
                    continue
                out.append(Entry(subject, attribute, var["value"], bool(var.get("secret"))))
        return out

    def hidden_from(self, viewer: str) -> list[str]:
        """Text values of the secrets ``viewer`` may not see (the longest first)."""
        values = {
            str(v["value"]).strip()
            for s, attrs in self.variables.items()
            if s != viewer
            for v in attrs.values()
            if v.get("secret") and isinstance(v["value"], str)
        }
        names = {n.casefold() for n in (*self.characters, WORLD)}  # a secret "Ines" must not erase Ines
        return sorted(
            (v for v in values if len(v) >= MIN_REDACTED and v.casefold() not in names), key=len, reverse=True
        )

    def redact(self, text: str, viewer: str) -> str:
        """``text`` with every secret value ``viewer`` may not see replaced by ``[hidden]``.

        A goal, a recap or the critic's feedback is written by a role that sees everything and
        may quote a secret; before such text reaches a character agent it passes through here."""
        for value in self.hidden_from(viewer):
            text = re.sub(re.escape(value), "[hidden]", text, flags=re.IGNORECASE)
        return text

    def pairs(self) -> list[tuple[str, str]]:
        """Every (subject, attribute) pair; unique by construction (the benchmark checks it)."""
        return [(s, a) for s, attrs in self.variables.items() for a in attrs]

    # -- the commit rule -----------------------------------------------------------------
    def apply(self, step: int, order: int, character: str, action: str, updates: Iterable[Update]) -> list[Commit]:
        """Apply one selected action's updates (overwrite or insert); returns what landed."""
        commits = []
        for update in updates:
            subject, attribute = self.resolve(update.subject, update.attribute)
            current = self.variables[subject].get(attribute, {})
            secret = bool(current.get("secret", False))
            new = coerce(update.value)
            self.variables[subject][attribute] = {"value": new, "step": step, "by": character, "secret": secret}
            commits.append(
                Commit(step, order, character, subject, attribute, current.get("value"), new, action, secret)
            )
        return commits

    # -- export --------------------------------------------------------------------------
    def nodes_and_edges(self) -> dict[str, list[dict[str, Any]]]:
        """The graph as explicit node and edge lists (for JSON export and drawing)."""
        nodes: list[dict[str, Any]] = [{"id": WORLD, "kind": "world", "label": self.title}]
        edges: list[dict[str, Any]] = []
        for name, role in self.characters.items():
            nodes.append({"id": f"character:{name}", "kind": "character", "label": name, "role": role})
            edges.append({"from": WORLD, "to": f"character:{name}", "kind": "contains"})
        for name in self.characters:
            for other, label in self.relationships(name).items():
                edges.append(
                    {
                        "from": f"character:{name}",
                        "to": f"character:{other}",
                        "kind": "relationship",
                        "label": str(label),
                    }
                )
        for subject, attrs in self.variables.items():
            owner = WORLD if subject == WORLD else f"character:{subject}"
            for attribute, var in attrs.items():
                if attribute.startswith(RELATION_PREFIX):
                    continue  # drawn as the relationship edge
                node_id = f"variable:{subject}/{attribute}"
                nodes.append(
                    {
                        "id": node_id,
                        "kind": "variable",
                        "label": f"{subject}.{attribute}",
                        "subject": subject,
                        "attribute": attribute,
                        "value": var["value"],
                        "secret": bool(var.get("secret")),
                        "last_step": var["step"],
                        "last_by": var["by"],
                    }
                )
                edges.append({"from": node_id, "to": owner, "kind": "concerns"})
        return {"nodes": nodes, "edges": edges}
