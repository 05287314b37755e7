"""A Magnet story definition from a story bible (``fabula story from-bible``), for the writer to edit.

Magnet's definition wants what a bible does not hold (a genre, a goal, each character's role,
personality, goals and location): those come from the flags or from the bible where it can tell
(a character's goals are the must-happen items that name them; the story's goal the first one),
and the rest is marked ``(edit)`` so the writer sees what to write. Canon facts become a
character's state variables; world rules become world variables; the timeline becomes the premise.
"""

from __future__ import annotations

import json
import re
from typing import Any

EDIT = "(edit)"


def story_from_bible(
    bible: dict[str, Any], *, title: str, genre: str, pages: float, goal: str | None = None
) -> dict[str, Any]:
    """The story definition (Magnet's TOML shape as a dict)."""
    musts = [r["description"] for r in bible["must_happen"]]
    first_place = bible["places"][0]["name"] if bible["places"] else EDIT
    past = " ".join(e["event"] for e in bible["timeline"])
    places = " ".join(f"{p['name']}: {p['description']}" for p in bible["places"] if p.get("description"))
    characters = []
    for person in bible["characters"]:
        first = person["name"].split()[0]
        theirs = [m for m in musts if re.search(rf"\b{re.escape(first)}\b", m)]
        characters.append(
            {
                "name": person["name"],
                "role": EDIT,
                "description": person.get("description") or EDIT,
                "personality": EDIT,
                "goals": theirs or [goal or (musts[0] if musts else EDIT)],
                "location": first_place,
                "state": {k: v for k, v in person.get("facts", {}).items()},
            }
        )
    story: dict[str, Any] = {
        "title": title,
        "genre": genre,
        "goal": goal or (musts[0] if musts else EDIT),
        "premise": " ".join(x for x in (places, past) if x) or EDIT,
        "pages": pages,
    }
    if bible["rules"]:
        story["world"] = {f"rule_{n}": rule for n, rule in enumerate(bible["rules"], start=1)}
    story["characters"] = characters
    return story


def to_toml(story: dict[str, Any]) -> str:
    """The definition as TOML, in the order of Magnet's examples (strings as JSON strings)."""

    def value(v: Any) -> str:
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{json.dumps(k, ensure_ascii=False)} = {value(x)}" for k, x in v.items()) + " }"
        if isinstance(v, bool | int | float):
            return json.dumps(v)
        return json.dumps(str(v), ensure_ascii=False)

    lines = ["# A Magnet story definition made from a story bible: edit every (edit), then fabula story check."]
    lines += [f"{key} = {value(story[key])}" for key in ("title", "genre", "goal", "premise", "pages")]
    if story.get("world"):
        lines += ["", "[world]"] + [f"{k} = {value(v)}" for k, v in story["world"].items()]
    for person in story["characters"]:
        lines += ["", "[[characters]]"] + [f"{k} = {value(v)}" for k, v in person.items() if v != {}]
    return "\n".join(lines) + "\n"
