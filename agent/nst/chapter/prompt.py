"""The chapter prompt of NstAgent, laid out for the prefix cache.

Order (paper Section 4.2 and the design notes): system prompt, story prompt, full frozen
outline, then the state with its append-only past events before the parts that change, the
number of completed chapters, and last the current task. No earlier chapter text.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from agent.gate import Gate
from agent.nst.chapter.planned import PlannedChapter
from agent.nst.state import NarrativeState

SYSTEM_BASE = """You are a novelist writing a long story one chapter at a time, with tools.
Every turn you reply with exactly one tool call as a JSON object; the "tool" field names it.
- read: {"tool": "read", "chapter": i, "offset": 0} returns the text of written chapter i (a long chapter may
  come in pages: the result says which offset continues it).
- search: {"tool": "search", "query": "..."} returns short passages from earlier chapters that match the words.
- write: {"tool": "write", "title": "..."} starts the chapter; you then write its complete prose as plain text.
  The chapter is accepted only if its length is inside the accepted range; otherwise write it again.
- correct: {"tool": "correct", "chapter": i, "old": "...", "new": "...", "reason": "..."} replaces one exact
  passage of chapter i to fix a factual or continuity error (never for style).
- finish: {"tool": "finish"} ends the chapter.
Only the tools allowed at each moment are available; budgets are per chapter.
The outline is a plan, not prose: expand each chapter into scenes with dialogue, sensory detail and inner
experience."""

SYSTEM_STATE = """
- update: {"tool": "update", ...} records what the chapter changed in the narrative state. Call it exactly once,
  after the accepted write, with four arrays (use [] when nothing changes):
{characters}  * add_past_event: {key, description} for each event of this chapter that the outline does not already
    state and that may matter later. Keys are new lower_snake_case names; a past event never changes.
  * add_future_requirement: {key, description} for each promise the story has made and must keep later:
    a planted clue, an open question, a vow, a coming confrontation.
  * resolve_future_requirement: keys of open requirements this chapter fulfilled.
{evidence}The narrative state is your memory of everything written so far: keep the story consistent with it."""


EVIDENCE_RULE = (
    "  Every new or changed entry carries evidence: a short passage copied exactly from the chapter you just wrote.\n"
    """  An entry whose evidence is not in the chapter is refused (the others are kept); you may fix refused ones once.
"""
)
"""fabula's evidence gating (the ``evidence`` setting); the paper's update has no quotes (Eq. 6)."""


CHARACTER_SNAPSHOTS = (
    "  * upsert_character_state: a complete snapshot of every character whose situation changed or who first\n"
    "    appeared: name, location, goal, relationships, knowledge, possessions, condition (physical and emotional),\n"
    "    and facts: identity facts that must never drift ({key, value}: age, birth_date, appearance, title,\n"
    "    aliases, ...). It replaces the previous snapshot whole, so repeat the facts that still hold.\n"
)
CHARACTER_NOTES = (
    "  * upsert_character_state: {name, description} for every character whose situation changed or who first\n"
    "    appeared, the description saying where they are, what they want, their relationships, what they know and\n"
    "    have, and their condition. It replaces the previous entry whole.\n"
)
"""The character entry as the reference asks for it (``state_style`` "reference"), in fabula's words."""


def system_prompt(*, with_state: bool, evidence: bool = True, notes: bool = False) -> str:
    state = SYSTEM_STATE.replace("{evidence}", EVIDENCE_RULE if evidence else "").replace(
        "{characters}", CHARACTER_NOTES if notes else CHARACTER_SNAPSHOTS
    )
    return SYSTEM_BASE + (state if with_state else "")


def outline_block(outline: Sequence[PlannedChapter], focus: int | None = None) -> str:
    """The outline, one JSON line a chapter. With ``focus`` (a chapter id; budget step d) only the
    act holding it and its neighbours are in full, the other chapters as titles; acts are
    :func:`act_size` chapters, so the block changes only when the story enters a new act."""
    size = act_size(len(outline))
    lines = []
    for c in outline:
        full = focus is None or abs((c.id - 1) // size - (focus - 1) // size) <= 1
        item = c.as_json() if full else {"id": c.id, "title": c.title}
        lines.append(json.dumps(item, ensure_ascii=False))
    return "\n".join(lines)


def act_size(chapters: int, acts: int = 5) -> int:
    return max(1, -(-chapters // acts))


def chapter_prompt(
    *,
    story_prompt: str,
    outline: Sequence[PlannedChapter],
    state: NarrativeState | None,
    completed: int,
    chapter: PlannedChapter,
    gate: Gate,
    lookback: bool,
    abridged: bool = False,
    avoid: list[str] | None = None,
    style: str = "",
    language: str = "",
    state_style: str = "fabula",
) -> str:
    """The user message that opens chapter ``chapter.id``'s conversation; ``avoid``: the book's own
    worst offenders by ``fabula lint`` (``agent.nst.chapter.avoid``), named in the task. ``style``: the ``# Style``
    block (``agent.style.guide.prompt_block``), before the task; ``language``: the language line."""
    heading = "frozen; acts away from this one by title only" if abridged else "frozen"
    parts = [
        f"# Story prompt\n{story_prompt}",
        f"# Outline ({len(outline)} chapters, {heading})\n{outline_block(outline, chapter.id if abridged else None)}",
    ]
    if state is not None:
        parts.append(f"# Narrative state\n{state.render(state_style)}")
    parts.append(f"# Progress\nCompleted chapters: {completed} of {len(outline)}.")
    if style:
        parts.append(style)
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
        f'# Current task\nWrite chapter {chapter.id}: "{chapter.title}".\n'
        f"What happens: {chapter.description}\n"
        f"Length: {gate.describe()}.\n"
        + (f"Avoid these phrases and words, which this book already overuses: {'; '.join(avoid)}.\n" if avoid else "")
        + (f"{language}\n" if language else "")
        + f"Order: {order}."
    )
    return "\n\n".join(parts)


def prose_request(index: int, title: str, gate: Gate) -> str:
    """The message that asks for the chapter's prose after a write call."""
    return (
        f'Now write the complete text of chapter {index}, "{title}": {gate.describe()}. '
        "The outline is a plan, not prose: expand it into scenes with dialogue, sensory detail and inner "
        "experience. Reply with the chapter's prose only: no title line, no notes, no JSON."
    )


NATIVE_SYSTEM = (
    "You are a seasoned novelist writing a long novel one chapter at a time. "
    "You work through the tools: read and search what is written, write the chapter, correct continuity errors, "
    "and keep the structured narrative state up to date."
)
"""The native protocol's system prompt (``tool_protocol`` "native"): two sentences, the reference's placement;
every rule lives in the chapter prompt and the tools' descriptions."""


def native_chapter_prompt(
    *,
    story_prompt: str,
    outline: Sequence[PlannedChapter],
    state: NarrativeState | None,
    completed: int,
    chapter: PlannedChapter,
    gate: Gate,
    lookback: bool,
    language: str = "",
) -> str:
    """The user message that opens a chapter under the native protocol, in the reference's order (opening
    line, story prompt, whole outline as indented JSON, state as JSON, chapters done, the task, the execution
    order, then the writing and state rules), in fabula's words. The length is told as ±tolerance of the
    target, as the reference tells it; the write tool's result names the range."""
    spread = round(100 * (gate.high - gate.target) / gate.target) if gate.target else 20
    outline_json = json.dumps([c.as_json() for c in outline], ensure_ascii=False, indent=2)
    parts = [
        f"Write chapter {chapter.id} of a long novel.",
        f"# Story prompt\n{story_prompt}",
        f"# The whole outline (frozen)\n{outline_json}",
    ]
    if state is not None:
        parts.append(f"# Narrative state now\n{state.render('reference')}")
    parts.append(f"# Chapters done\nChapters written so far: {completed}.")
    parts.append(
        f"# Current task\nChapter id: {chapter.id}\nChapter title: {chapter.title}\nWhat happens: {chapter.description}"
        f"\nLength: {gate.target} words; the complete chapter must stay strictly within ±{spread}% of that."
        + (f"\n{language}" if language else "")
    )
    steps = []
    if lookback:
        steps.append("read or search earlier chapters as you need them")
    steps.append("write the complete chapter with write")
    if lookback:
        steps.append("correct a factual or continuity error with correct if you find one")
    if state is not None:
        steps.append(
            "once the prose is final, call update exactly once: the characters whose situation changed or who "
            "appeared, the new events, the new obligations and the keys of obligations fulfilled"
        )
    steps.append("when everything is done, call no tool and reply only DONE (any other text does not end the chapter)")
    rules = [
        "The outline is a plan, not prose: turn it into scenes with dialogue, sensory detail and inner experience.",
    ]
    if state is not None:
        rules += [
            "upsert_character_state: {name, description} for each character whose situation changed or who first "
            "appeared; the description is the whole current picture (where they are, what they want, their "
            "relationships, what they know and carry, their condition) and replaces any entry of that name.",
            "add_past_event: {key, description} only for events of this chapter that the outline does not already "
            "state and that matter later; keys are stable lower_snake_case names.",
            "add_future_requirement: {key, description} only for concrete obligations the story must meet later.",
            "resolve_future_requirement: the keys of open obligations this chapter fulfilled.",
            "Send the four fields as JSON arrays (never as strings), all four every time, [] when empty.",
        ]
    rules.append("Each tool states its own conditions, limits and schema: follow them.")
    parts.append(
        "Do it in this order:\n"
        + "\n".join(f"{i}. {step}" for i, step in enumerate(steps, 1))
        + "\n\nWriting and state rules:\n"
        + "\n".join(f"- {rule}" for rule in rules)
    )
    return "\n\n".join(parts)
