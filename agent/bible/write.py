"""A story bible from a book's derived narrative state (``fabula bible export RUN``), written as
Markdown or TOML that :func:`agent.bible.read.read_bible` reads back to the same shape.

For a sequel or a series: the characters with their facts (each character's facts become canon),
past events as the timeline, open requirements as must-happen; places and rules come from the
bible the run was written with, if any (a narrative state keeps neither).
"""

from __future__ import annotations

import json
from typing import Any


def from_state(narrative: dict[str, Any], earlier: dict[str, Any] | None = None) -> dict[str, Any]:
    """The bible of a narrative state (``NarrativeState.to_json``), keeping ``earlier``'s places and rules."""
    characters = []
    for name, entry in (narrative.get("characters") or {}).items():
        facts = entry.get("facts") or {}
        facts = facts if isinstance(facts, dict) else {f["key"]: f["value"] for f in facts}
        described = "; ".join(str(entry[f]) for f in ("condition", "goal", "location") if entry.get(f))
        characters.append({"name": name, "description": described, "facts": {k: str(v) for k, v in facts.items()}})
    return {
        "characters": characters,
        "places": list((earlier or {}).get("places", [])),
        "rules": list((earlier or {}).get("rules", [])),
        "timeline": [{"key": k, "event": v} for k, v in (narrative.get("past_events") or {}).items()],
        "must_happen": [{"key": k, "description": v} for k, v in (narrative.get("future_requirements") or {}).items()],
    }


def to_toml(bible: dict[str, Any]) -> str:
    """The bible as TOML (every key kept; strings written as JSON strings, which TOML reads the same)."""
    out: list[str] = []
    q = lambda s: json.dumps(str(s), ensure_ascii=False)  # noqa: E731
    for person in bible["characters"]:
        out += ["[[characters]]", f"name = {q(person['name'])}", f"description = {q(person.get('description', ''))}"]
        if person.get("facts"):
            out.append("[characters.facts]")
            out += [f"{key} = {q(value)}" for key, value in person["facts"].items()]
        out.append("")
    for place in bible["places"]:
        out += ["[[places]]", f"name = {q(place['name'])}", f"description = {q(place.get('description', ''))}", ""]
    for event in bible["timeline"]:
        out += ["[[timeline]]", f"key = {q(event['key'])}", f"event = {q(event['event'])}"]
        out += [f"date = {q(event['date'])}"] if event.get("date") else []
        out.append("")
    for item in bible["must_happen"]:
        out += ["[[must_happen]]", f"key = {q(item['key'])}", f"description = {q(item['description'])}", ""]
    rules = f"rules = [{', '.join(q(r) for r in bible['rules'])}]\n\n" if bible["rules"] else ""
    return rules + "\n".join(out)


def to_markdown(bible: dict[str, Any]) -> str:
    """The bible as Markdown with headings (keys of events and requirements are made again from their words)."""
    out = ["# Characters"]
    for person in bible["characters"]:
        facts = "; ".join(f"{k}: {v}" for k, v in person.get("facts", {}).items())
        text = " ".join(x for x in (person.get("description", ""), f"Facts: {facts}." if facts else "") if x)
        out += [f"## {person['name']}", text or "(no description)"]
    out += ["# Places"] + [line for p in bible["places"] for line in (f"## {p['name']}", p.get("description") or "-")]
    out += ["# Rules"] + [f"- {rule}" for rule in bible["rules"]]
    out += ["# Timeline"] + [f"- {e['date'] + ': ' if e.get('date') else ''}{e['event']}" for e in bible["timeline"]]
    out += ["# Must happen"] + [f"- {r['description']}" for r in bible["must_happen"]]
    return "\n".join(out) + "\n"
