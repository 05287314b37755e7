"""The chapter prompt of NstAgent, laid out for the prefix cache.

Order (paper Section 4.2 and the design notes): system prompt, story prompt, full frozen
outline, then the state with its append-only past events before the parts that change, the
number of completed chapters, and last the current task. No earlier chapter text.
"""

from __future__ import annotations

import json
from typing import Any

from agent.nst.length import Gate
from agent.nst.state import NarrativeState

SYSTEM_BASE = """You are a novelist writing a long story one chapter at a time, with tools.
Every turn you reply with exactly one tool call as a JSON object; the "tool" field names it.
- read: {"tool": "read", "chapter": i} returns the full text of written chapter i.
- search: {"tool": "search", "query": "..."} returns short passages from earlier chapters that match the words.
- write: {"tool": "write", "title": "..."} starts the chapter; you then write its complete prose as plain text.
  The chapter is accepted only if its length is inside the accepted range; otherwise write it again.
- correct: {"tool": "correct", "chapter": i, "old": "...", "new": "...", "reason": "..."} replaces one exact
  passage of chapter i to fix a factual or continuity error (never for style).
- finish: {"tool": "finish"} ends the chapter.
Only the tools allowed at each moment are available; budgets are per chapter."""

SYSTEM_STATE = """
- update: {"tool": "update", ...} records what the chapter changed in the narrative state. Call it exactly once,
  after the accepted write, with four arrays (use [] when nothing changes):
  * upsert_character_state: a complete snapshot of every character whose situation changed or who first
    appeared: name, location, goal, relationships, knowledge, possessions, condition (physical and emotional).
    It replaces the character's previous snapshot whole, so repeat what still holds (names, ages, dates).
  * add_past_event: {key, description} for each event of this chapter that the outline does not already
    state and that may matter later. Keys are new lower_snake_case names; a past event never changes.
  * add_future_requirement: {key, description} for each promise the story has made and must keep later:
    a planted clue, an open question, a vow, a coming confrontation.
  * resolve_future_requirement: keys of open requirements this chapter fulfilled.
The narrative state is your memory of everything written so far: keep the story consistent with it."""


def system_prompt(*, with_state: bool) -> str:
    return SYSTEM_BASE + (SYSTEM_STATE if with_state else "")


def outline_block(outline: list[dict[str, Any]]) -> str:
    return "\n".join(json.dumps({"id": c["id"], "title": c["title"], "description": c["description"],
                                 "target_words": c["target_words"]}, ensure_ascii=False) for c in outline)


def chapter_prompt(*, story_prompt: str, outline: list[dict[str, Any]], state: NarrativeState | None,
                   completed: int, chapter: dict[str, Any], gate: Gate, lookback: bool) -> str:
    """The user message that opens chapter ``chapter['id']``'s conversation."""
    parts = [f"# Story prompt\n{story_prompt}",
             f"# Outline ({len(outline)} chapters, frozen)\n{outline_block(outline)}"]
    if state is not None:
        parts.append(f"# Narrative state\n{state.render()}")
    parts.append(f"# Progress\nCompleted chapters: {completed} of {len(outline)}.")
    steps = []
    if lookback and completed:
        steps.append("look up earlier chapters with search or read if you need a detail")
    steps.append("write the chapter")
    if lookback:
        steps.append("correct a factual or continuity error if you find one")
    if state is not None:
        steps.append("update the narrative state once")
    steps.append("finish")
    order = "; ".join(f"({i}) {s}" for i, s in enumerate(steps, 1))
    parts.append(
        f"# Current task\nWrite chapter {chapter['id']}: \"{chapter['title']}\".\n"
        f"What happens: {chapter['description']}\n"
        f"Length: {gate.describe()}.\n"
        f"Order: {order}.")
    return "\n\n".join(parts)


def prose_request(index: int, title: str, gate: Gate) -> str:
    """The message that asks for the chapter's prose after a write call."""
    return (f"Now write the complete text of chapter {index}, \"{title}\": {gate.describe()}. "
            "Reply with the chapter's prose only: no title line, no notes, no JSON.")
