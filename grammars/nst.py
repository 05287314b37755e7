"""NstAgent's structured replies: the chapter outline and the six tool calls of the chapter loop.

Each tool call is its own closed object with a constant ``tool`` field, so a turn's grammar is
the union of only the calls legal at that moment (``agent.nst.chapter.tools.turn_grammar``); the
controller still checks every rule. Prose is never a JSON string here: ``write`` carries the
title, and the chapter text is a plain-text generation that the controller triggers.

Keys and lengths are bounded by the controller and ``max_tokens``, not by counted
repetitions in the schema (see ``grammars.base``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from grammars.base import Grammar
from grammars.registry import register

KEY_PATTERN = r"^[a-z][a-z0-9_]*$"
"""Shape of state keys in the grammar; the controller adds the 64-character bound."""


class OutlineChapter(Grammar):
    id: int = Field(ge=1, description="chapter number, 1, 2, 3, ... in order")
    title: str = Field(min_length=1)
    description: str = Field(min_length=1, description="what happens in this chapter")
    target_words: int = Field(ge=1, description="target length of this chapter in words")


@register("nst_outline")
class Outline(Grammar):
    """The frozen chapter-level outline every chapter-based method writes from, with the book's title
    (asked first: a title the model has committed to colours the chapters it then plans)."""

    title: str = Field(min_length=1, description="the title of the book")
    chapters: list[OutlineChapter] = Field(min_length=1)


@register("nst_read")
class ReadCall(Grammar):
    """Return the text of a written chapter: whole, or a page of it when the context is tight
    (the result names the offset to continue from)."""

    tool: Literal["read"]
    chapter: int = Field(ge=1)
    offset: int = Field(0, ge=0, description="character offset to continue a paged read from (0: the start)")


@register("nst_search")
class SearchCall(Grammar):
    """BM25 search over sentence windows of earlier chapters."""

    tool: Literal["search"]
    query: str = Field(min_length=1)


@register("nst_write")
class WriteCall(Grammar):
    """Announce the chapter; its prose follows as a plain-text reply."""

    tool: Literal["write"]
    title: str = Field(min_length=1)


@register("nst_correct")
class CorrectCall(Grammar):
    """Replace one exact span of a chapter to fix a factual or continuity error."""

    tool: Literal["correct"]
    chapter: int = Field(ge=1)
    old: str = Field(min_length=1, description="the exact text to replace, quoted from the chapter")
    new: str = Field(description="the replacement")
    reason: str = Field(min_length=1, description="the fact or continuity error this fixes")


class Fact(Grammar):
    """One identity fact of a character: age, birth_date, appearance, title, aliases, ..."""

    key: str = Field(pattern=KEY_PATTERN, description="lower_snake_case name of the fact, e.g. birth_date")
    value: str = Field(min_length=1)


EVIDENCE = "a short passage copied exactly from the chapter just written that shows this"


class CharacterSnapshot(Grammar):
    """A complete snapshot of one character, replacing any earlier one (the paper's, Eq. 6: no quote)."""

    name: str = Field(min_length=1)
    location: str
    goal: str
    relationships: str
    knowledge: str
    possessions: str
    condition: str = Field(description="physical and emotional condition")
    facts: list[Fact] = Field(
        description="identity facts that must never drift: age, birth_date, appearance, "
        "title, aliases, ... (repeat the ones that still hold)"
    )


class CharacterState(CharacterSnapshot):
    """A complete snapshot of one character, replacing any earlier one."""

    evidence: str = Field(min_length=1, description=EVIDENCE)


class CharacterNote(Grammar):
    """One character as it stands after the chapter, in a single description, replacing any earlier one."""

    name: str = Field(min_length=1)
    description: str = Field(
        min_length=1,
        description="where the character is, what they want, their relationships, what they know and have, "
        "and their physical and emotional condition",
    )


class CharacterNoteEvidence(CharacterNote):
    """One character as it stands after the chapter, in a single description, replacing any earlier one."""

    evidence: str = Field(min_length=1, description=EVIDENCE)


class Entry(Grammar):
    """A keyed entry as the paper's update has it (Eq. 6: no quote)."""

    key: str = Field(pattern=KEY_PATTERN, description="lower_snake_case key")
    description: str = Field(min_length=1)


class KeyedEntry(Entry):
    evidence: str = Field(min_length=1, description=EVIDENCE)


@register("nst_update")
class UpdateCall(Grammar):
    """The chapter's state transition (Eq. 6): four arrays, empty when nothing changes. Each turn
    narrows it (``agent.nst.tools``): resolve keys to the requirements open at that moment, and a
    minimum of past events only when the run's ``min_past_events`` asks for one."""

    tool: Literal["update"]
    upsert_character_state: list[CharacterState]
    add_past_event: list[KeyedEntry]
    add_future_requirement: list[KeyedEntry]
    resolve_future_requirement: list[str] = Field(description="keys of open requirements this chapter fulfilled")


@register("nst_update_event")
class EventUpdate(Grammar):
    """The last resort past the turn cap, when a full update failed (cut off or invalid): the
    chapter's one most important event, so the kept chapter still reaches the state's chronology."""

    add_past_event: list[KeyedEntry] = Field(min_length=1, max_length=1)

    def as_update(self) -> UpdateCall:
        return UpdateCall(
            tool="update",
            upsert_character_state=[],
            add_past_event=self.add_past_event,
            add_future_requirement=[],
            resolve_future_requirement=[],
        )


@register("nst_finish")
class FinishCall(Grammar):
    """End the chapter (legal only after the accepted write and the update)."""

    tool: Literal["finish"]


TOOL_CALLS: dict[str, type[Grammar]] = {
    "read": ReadCall,
    "search": SearchCall,
    "write": WriteCall,
    "correct": CorrectCall,
    "update": UpdateCall,
    "finish": FinishCall,
}
"""Every tool, in the order the turn grammar lists them."""
