"""The structured world state: a directed graph, its flattened views, and the commit rule.

Nodes: one root ``world`` node, one node per character, one node per state variable.
Edges: world -> character (``contains``), character -> character (``relationship``, with its
label), variable -> character or world (``concerns``). Agents never see the graph itself:
they see it flattened to key -> value, and a character agent sees only the variables that
concern it, the characters it relates to, and the world.

Commits follow the paper exactly: the selected actions' updates are applied in the
narrator's order, a new key is inserted, an existing key is overwritten; nothing else
writes to the state. Each applied write is returned as a :class:`Commit`, which the step
record keeps, so the history of every variable (when, by whom, why) can be rebuilt.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from agent.magnet.definition import StoryDefinition

WORLD = "world"
_NUMBER = re.compile(r"^-?\d{1,15}$")


@dataclass(frozen=True)
class Update:
    """A proposed write, as the critic (or character, without a critic) states it."""

    concerns: str
    key: str
    value: Any


@dataclass(frozen=True)
class Commit:
    """A write that landed: what it replaced, who caused it, at which step and why."""

    step: int
    order: int
    character: str
    key: str
    concerns: str
    old: Any
    new: Any
    action: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


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


def slug(name: str) -> str:
    """A character name as a key prefix: ``"Lucia Marsh"`` -> ``"lucia_marsh"``."""
    out = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    return out if out and out[0].isalpha() else f"c_{out}"


class WorldGraph:
    """The world state of one story. JSON round-trips through :meth:`to_json`/:meth:`from_json`."""

    def __init__(self, title: str, characters: dict[str, str], relationships: list[dict[str, str]],
                 variables: dict[str, dict[str, Any]]) -> None:
        self.title = title
        self.characters = characters  # name -> role
        self.relationships = relationships  # {"from", "to", "label"}
        self.variables = variables  # key -> {"value", "concerns", "step", "by"}

    # -- building ------------------------------------------------------------------------
    @classmethod
    def from_definition(cls, story: StoryDefinition) -> WorldGraph:
        """The initial graph: world variables, each character's location and its own state."""
        variables: dict[str, dict[str, Any]] = {}
        for key, value in story.world.items():
            variables[key] = {"value": value, "concerns": WORLD, "step": 0, "by": None}
        for char in story.characters:
            variables[f"{slug(char.name)}_location"] = {"value": char.location, "concerns": char.name,
                                                         "step": 0, "by": None}
            for key, value in char.state.items():
                variables[f"{slug(char.name)}_{key}"] = {"value": value, "concerns": char.name, "step": 0,
                                                         "by": None}
        relationships = [{"from": c.name, "to": other, "label": label}
                         for c in story.characters for other, label in c.relationships.items()]
        return cls(story.title, {c.name: c.role for c in story.characters}, relationships, variables)

    def to_json(self) -> dict[str, Any]:
        return {"title": self.title, "characters": dict(self.characters),
                "relationships": [dict(r) for r in self.relationships],
                "variables": {k: dict(v) for k, v in self.variables.items()}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorldGraph:
        return cls(data["title"], dict(data["characters"]), [dict(r) for r in data["relationships"]],
                   {k: dict(v) for k, v in data["variables"].items()})

    # -- views ---------------------------------------------------------------------------
    def flat(self) -> dict[str, Any]:
        """Every variable as key -> value, in insertion order (what the critic and narrator see)."""
        return {k: v["value"] for k, v in self.variables.items()}

    def related(self, name: str) -> list[str]:
        """Characters ``name`` has a relationship to (outgoing edges)."""
        return [r["to"] for r in self.relationships if r["from"] == name]

    def view(self, name: str) -> dict[str, Any]:
        """What character ``name`` sees: its variables, its relations' variables, world-level ones."""
        visible = {WORLD, name, *self.related(name)}
        return {k: v["value"] for k, v in self.variables.items() if v["concerns"] in visible}

    # -- the commit rule -----------------------------------------------------------------
    def apply(self, step: int, order: int, character: str, action: str, updates: Iterable[Update]) -> list[Commit]:
        """Apply one selected action's updates (overwrite or insert); returns what landed."""
        commits = []
        for update in updates:
            concerns = update.concerns if update.concerns in self.characters else WORLD
            old = self.variables.get(update.key, {}).get("value")
            new = coerce(update.value)
            self.variables[update.key] = {"value": new, "concerns": concerns, "step": step, "by": character}
            commits.append(Commit(step, order, character, update.key, concerns, old, new, action))
        return commits

    # -- export --------------------------------------------------------------------------
    def nodes_and_edges(self) -> dict[str, list[dict[str, Any]]]:
        """The graph as explicit node and edge lists (for JSON export and drawing)."""
        nodes: list[dict[str, Any]] = [{"id": WORLD, "kind": "world", "label": self.title}]
        edges: list[dict[str, Any]] = []
        for name, role in self.characters.items():
            nodes.append({"id": f"character:{name}", "kind": "character", "label": name, "role": role})
            edges.append({"from": WORLD, "to": f"character:{name}", "kind": "contains"})
        for rel in self.relationships:
            edges.append({"from": f"character:{rel['from']}", "to": f"character:{rel['to']}",
                          "kind": "relationship", "label": rel["label"]})
        for key, var in self.variables.items():
            nodes.append({"id": f"variable:{key}", "kind": "variable", "label": key, "value": var["value"],
                          "last_step": var["step"], "last_by": var["by"]})
            target = WORLD if var["concerns"] == WORLD else f"character:{var['concerns']}"
            edges.append({"from": f"variable:{key}", "to": target, "kind": "concerns"})
        return {"nodes": nodes, "edges": edges}
