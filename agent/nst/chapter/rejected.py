"""Rejected drafts in the conversation: at most one stays in full (NstAgent A.1).

The first rejected draft stays as feedback; a later one replaces it only if it is at least
10% closer to the accepted range, otherwise its text is dropped and only its word count is
kept. A chapter with many retries therefore never fills its context with near-duplicates.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent.gate import Gate
from agent.llm.types import Message

CLOSER = 0.9


@dataclass
class Draft:
    title: str
    text: str
    words: int
    truncated: bool
    distance: int
    message: int
    """Index of the assistant message that holds the draft's text."""

    def rank(self) -> tuple[bool, int]:
        """Closest first; a complete draft before a cut one."""
        return (self.truncated, self.distance)


def placeholder(draft: Draft) -> str:
    cut = ", cut off at the token limit" if draft.truncated else ""
    return f"[rejected draft: {draft.words} words{cut}; text removed]"


class DraftKeeper:
    def __init__(self) -> None:
        self.rejected: list[Draft] = []
        self.kept: Draft | None = None

    def reject(self, draft: Draft, messages: list[Message]) -> bool:
        """File a rejected draft, editing ``messages`` in place; True if its text stays."""
        self.rejected.append(draft)
        if self.kept is None:
            self.kept = draft
            return True
        if draft.distance <= CLOSER * self.kept.distance:
            messages[self.kept.message] = {"role": "assistant", "content": placeholder(self.kept)}
            self.kept = draft
            return True
        messages[draft.message] = {"role": "assistant", "content": placeholder(draft)}
        return False

    def settle(self, messages: list[Message]) -> bool:
        """A write was accepted: the rejected draft still in full gives way to its placeholder (the
        reference's rule); True if one did."""
        if self.kept is None or messages[self.kept.message].get("content") != self.kept.text:
            return False
        messages[self.kept.message] = {"role": "assistant", "content": placeholder(self.kept)}
        return True

    def best(self) -> Draft | None:
        return min(self.rejected, key=Draft.rank) if self.rejected else None


def reference_feedback(words: int, gate: Gate, *, kept: bool, unended: bool = False) -> str:
    """What a rejected write is told under ``retry_feedback`` "reference", in fabula's words: the count
    against the target and range, what failed, and whether the draft is still in the conversation; an
    out-of-range draft is told how far to scale it (the reference's length feedback)."""
    head = (
        f"REJECTED: the draft has {words} words; this chapter targets {gate.target} words and accepts "
        f"{gate.low}-{gate.high}."
    )
    scale = ""
    if words > gate.high:
        scale = f" Shorten the whole draft to about {max(1, round(100 * gate.target / words))} % of its length."
    elif words < gate.low:
        scale = (
            f" Lengthen the whole draft to about {max(1, round(100 * gate.target / max(words, 1)))} % of its length."
        )
    check = " It also stops mid-sentence: end the chapter on a complete sentence." if unended else ""
    where = (
        " The rejected draft is still in the conversation above."
        if kept
        else " The rejected draft's text was removed from the conversation; its word count is kept."
    )
    return head + scale + check + where
