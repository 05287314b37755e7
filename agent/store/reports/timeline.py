"""The state over time: what the stored state holds after each unit and what changed.

States are stored whole after every unit; this reads them as named collections of
``key -> value`` (NstAgent: characters, past events, open requirements; Magnet: world
variables and goals; anything else: its top-level collections) and diffs consecutive units,
so a reader sees per chapter or step what was added, changed and removed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent.store.runstore import RunStore
from agent.store.snapshots import WorldTable


@dataclass(frozen=True)
class Change:
    """One entry of one collection: ``kind`` is added, changed or removed."""

    collection: str
    key: str
    kind: str
    old: Any = None
    new: Any = None

    def fields(self) -> list[tuple[str, Any, Any]]:
        """For a changed record (a character snapshot): only the fields that differ."""
        if not (isinstance(self.old, dict) and isinstance(self.new, dict)):
            return []
        return [
            (k, self.old.get(k), self.new.get(k))
            for k in sorted(self.old.keys() | self.new.keys())
            if _canon(self.old.get(k)) != _canon(self.new.get(k))
        ]


DERIVED = "derived"
"""The key of a chapter's state that records how it was derived from the text (``fabula derive``:
ok, error, version, calls, attempts, at)."""


@dataclass(frozen=True)
class UnitState:
    """The collections after ``unit`` and what changed since the unit before; ``failed``: the
    derive record of a chapter whose state could not be derived (None otherwise)."""

    unit: int
    collections: dict[str, dict[str, Any]]
    changes: list[Change] = field(default_factory=list)
    failed: dict[str, Any] | None = None

    def changed(self, collection: str) -> list[Change]:
        return [c for c in self.changes if c.collection == collection]


def collections(state: Any) -> dict[str, dict[str, Any]]:
    """The keyed collections of one stored state, in a fixed order."""
    if not isinstance(state, dict) or failed_derive(state) is not None:
        return {}  # a failed derive holds bookkeeping only, no collection
    narrative = state.get("narrative")
    if isinstance(narrative, dict):  # NstAgent: {"narrative": {...}, "chapter": {...}}
        return {name: _keyed(narrative.get(name)) for name in ("characters", "past_events", "future_requirements")}
    table = WorldTable.of(state)
    if table is not None:  # Magnet
        variables = {k: v.get("value") for k, v in table.items().items()}
        goals = {
            str(g.get("step", i)) + ": " + str(g.get("reason", "")): g.get("goal")
            for i, g in enumerate(state.get("goals") or [])
            if isinstance(g, dict)
        }
        return {"world_variables": variables, "goals": goals}
    return {k: _keyed(v) for k, v in state.items() if isinstance(v, dict | list)}


def failed_derive(state: Any) -> dict[str, Any] | None:
    """The derive record of a state whose derive failed (no narrative stored), else None."""
    record = state.get(DERIVED) if isinstance(state, dict) else None
    return record if isinstance(record, dict) and record.get("ok") is False else None


def _keyed(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, list):
        return {str(i): v for i, v in enumerate(value, start=1)}
    return {}


def diff(before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]]) -> list[Change]:
    out: list[Change] = []
    for name in after.keys() | before.keys():
        old, new = before.get(name, {}), after.get(name, {})
        for key in new:
            if key not in old:
                out.append(Change(name, key, "added", None, new[key]))
            elif _canon(old[key]) != _canon(new[key]):
                out.append(Change(name, key, "changed", old[key], new[key]))
        out += [Change(name, key, "removed", old[key], None) for key in old if key not in new]
    order = list(after) + [n for n in before if n not in after]
    return sorted(out, key=lambda c: (order.index(c.collection), c.kind != "added", c.key))


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def timeline(store: RunStore) -> list[UnitState]:
    """Every stored state from unit 1 on (unit 0, the initial state, is the baseline)."""
    rows = store.query("SELECT unit, state FROM states ORDER BY unit")
    out: list[UnitState] = []
    previous: dict[str, dict[str, Any]] = {}
    for unit, raw in rows:
        state = json.loads(raw)
        failed = failed_derive(state)
        current = previous if failed is not None else collections(state)  # the state stays as it was
        if unit > 0:
            out.append(
                UnitState(
                    unit,
                    {} if failed is not None else current,
                    [] if failed is not None else diff(previous, current),
                    failed,
                )
            )
        previous = current
    return out
