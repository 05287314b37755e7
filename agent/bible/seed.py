"""What a story bible gives a run: the initial narrative state (with its canon) and the planner's text."""

from __future__ import annotations

import json
from typing import Any

SNAPSHOT_FIELDS = ("location", "goal", "relationships", "knowledge", "possessions", "condition")
"""The narrative state's character snapshot fields (``agent.nst.state``); a bible fills ``condition``."""


def initial_narrative(bible: dict[str, Any]) -> dict[str, Any]:
    """The narrative state before chapter 1 (``NarrativeState.to_json``'s shape): the bible's characters
    with their facts, its timeline as past events, its must-happen list as open requirements, and
    ``canon``: each character's facts, which no update may contradict."""
    characters = {}
    for person in bible["characters"]:
        entry: dict[str, Any] = {f: "" for f in SNAPSHOT_FIELDS}
        entry["condition"] = person.get("description", "")
        if person.get("facts"):
            entry["facts"] = dict(person["facts"])
        characters[person["name"]] = entry
    events = {e["key"]: (f"{e['date']}: {e['event']}" if e.get("date") else e["event"]) for e in bible["timeline"]}
    requirements = {r["key"]: r["description"] for r in bible["must_happen"]}
    canon = {p["name"]: dict(p["facts"]) for p in bible["characters"] if p.get("facts")}
    return {
        "characters": characters,
        "past_events": events,
        "future_requirements": requirements,
        **({"canon": canon} if canon else {}),
    }


def planner_block(bible: dict[str, Any]) -> str:
    """The bible as the planner reads it: every section, the facts marked as canon."""
    lines = ["Story bible (the writer's world: keep to it; canon facts never change):"]
    for person in bible["characters"]:
        facts = "; ".join(f"{k}: {v}" for k, v in person.get("facts", {}).items())
        lines.append(
            f"- Character {person['name']}: {person.get('description', '')}"
            + (f" Canon facts: {facts}." if facts else "")
        )
    lines += [f"- Place {p['name']}: {p.get('description', '')}" for p in bible["places"]]
    lines += [f"- World rule: {rule}" for rule in bible["rules"]]
    lines += [
        f"- Past event: {e.get('date', '') + ': ' if e.get('date') else ''}{e['event']}" for e in bible["timeline"]
    ]
    lines += [f"- Must happen ({r['key']}): {r['description']}" for r in bible["must_happen"]]
    return "\n".join(lines)


def digest(bible: dict[str, Any]) -> str:
    """A stable fingerprint of the bible (for the plan cache's key)."""
    import hashlib

    return hashlib.sha256(json.dumps(bible, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


def canon_text(bible: dict[str, Any]) -> str:
    """The bible as prose a consistency judge reads as the book's chapter 0 (``fabula check --bible``):
    one plain sentence per fact, so a contradiction can quote it exactly."""
    lines = []
    for person in bible["characters"]:
        if person.get("description"):
            lines.append(f"{person['name']}: {person['description']}")
        facts = person.get("facts", {}).items()
        lines += [f"{person['name']}, {key.replace('_', ' ')}: {value}." for key, value in facts]
    lines += [f"{p['name']}: {p['description']}" for p in bible["places"] if p.get("description")]
    lines += [f"Rule: {rule}" for rule in bible["rules"]]
    lines += [f"{e['date'] + ': ' if e.get('date') else ''}{e['event']}" for e in bible["timeline"]]
    return "\n\n".join(lines)
