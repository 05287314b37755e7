"""The narrative state ``s_t = (C, P, F)`` and its transition ``U`` (paper Eq. 6).

Characters are whole snapshots keyed by name (matched case-insensitively), past events are
keyed records that never change once written, future requirements are keyed obligations that
are added and resolved. An update applies atomically: any bad item and nothing is applied.

The prompt layout serves the prefix cache: past events (append-only, insertion order) come
first, then what changes from chapter to chapter (characters, open requirements), so the part
of the prompt that must be recomputed per chapter stays roughly constant as the story grows.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from grammars.nst import UpdateCall

KEY = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
SNAPSHOT_FIELDS = ("location", "goal", "relationships", "knowledge", "possessions", "condition")


class UpdateError(ValueError):
    """An update that cannot be applied; its message lists every problem found."""


@dataclass
class NarrativeState:
    characters: dict[str, dict[str, str]] = field(default_factory=dict)
    past_events: dict[str, str] = field(default_factory=dict)
    future_requirements: dict[str, str] = field(default_factory=dict)

    # -- persistence -------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"characters": self.characters, "past_events": self.past_events,
                "future_requirements": self.future_requirements}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> NarrativeState:
        data = data or {}
        return cls(dict(data.get("characters", {})), dict(data.get("past_events", {})),
                   dict(data.get("future_requirements", {})))

    def counts(self) -> dict[str, int]:
        return {"characters": len(self.characters), "past_events": len(self.past_events),
                "open_requirements": len(self.future_requirements)}

    # -- the transition ------------------------------------------------------------------
    def apply(self, update: UpdateCall) -> NarrativeState:
        """``U(s, Δ)``: a new state, or :class:`UpdateError` with nothing applied."""
        errors: list[str] = []
        characters = dict(self.characters)
        seen: set[str] = set()
        for snap in update.upsert_character_state:
            name = snap.name.strip()
            if not name:
                errors.append("upsert_character_state: a character has an empty name")
                continue
            folded = name.casefold()
            if folded in seen:
                errors.append(f"upsert_character_state: {name!r} appears twice in this update")
                continue
            seen.add(folded)
            for existing in [k for k in characters if k.casefold() == folded]:
                del characters[existing]
            characters[name] = {f: getattr(snap, f) for f in SNAPSHOT_FIELDS}
        events = dict(self.past_events)
        for entry in update.add_past_event:
            if not _key_ok(entry.key, "add_past_event", errors):
                continue
            if entry.key in events and events[entry.key] != entry.description:
                errors.append(f"add_past_event: key {entry.key!r} already exists with a different text; "
                              "past events never change, choose a new key")
                continue
            events[entry.key] = entry.description
        requirements = dict(self.future_requirements)
        for entry in update.add_future_requirement:
            if not _key_ok(entry.key, "add_future_requirement", errors):
                continue
            if entry.key in requirements and requirements[entry.key] != entry.description:
                errors.append(f"add_future_requirement: key {entry.key!r} is already open with a different text")
                continue
            requirements[entry.key] = entry.description
        for key in update.resolve_future_requirement:
            if key not in requirements:
                errors.append(f"resolve_future_requirement: no open requirement has key {key!r}")
                continue
            del requirements[key]
        if errors:
            raise UpdateError("; ".join(errors))
        return NarrativeState(characters, events, requirements)

    # -- the prompt ------------------------------------------------------------------------
    def render(self) -> str:
        """The state as it appears in the chapter prompt: append-only part first."""
        lines = ["Past events (in the order they happened; key: description):"]
        lines += [json.dumps({k: v}, ensure_ascii=False) for k, v in self.past_events.items()] or ["(none yet)"]
        lines.append("")
        lines.append("Characters (current snapshot of each):")
        snapshots = [json.dumps({"name": n, **s}, ensure_ascii=False) for n, s in self.characters.items()]
        lines += snapshots or ["(none yet)"]
        lines.append("")
        lines.append("Open future requirements (key: obligation):")
        lines += [json.dumps({k: v}, ensure_ascii=False) for k, v in self.future_requirements.items()] or ["(none)"]
        return "\n".join(lines)


def _key_ok(key: str, where: str, errors: list[str]) -> bool:
    if KEY.fullmatch(key) is None:
        errors.append(f"{where}: key {key!r} must match ^[a-z][a-z0-9_]{{0,63}}$")
        return False
    return True


def describe_update(update: UpdateCall) -> str:
    return (f"{len(update.upsert_character_state)} character(s) upserted, {len(update.add_past_event)} event(s) "
            f"added, {len(update.add_future_requirement)} requirement(s) added, "
            f"{len(update.resolve_future_requirement)} resolved")
