"""Rejected drafts in the conversation: at most one stays in full (NstAgent A.1).

The first rejected draft stays as feedback; a later one replaces it only if it is at least
10% closer to the accepted range, otherwise its text is dropped and only its word count is
kept. A chapter with many retries therefore never fills its context with near-duplicates.
"""

from __future__ import annotations

import hashlib
import json
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
    call_id: str | None = None
    """The native ``write`` call whose ``content`` argument holds the text (``None``: the message's content)."""
    target: int = 0
    """The chapter's target (named in a native placeholder)."""

    def rank(self) -> tuple[bool, int]:
        """Closest first; a complete draft before a cut one."""
        return (self.truncated, self.distance)


def placeholder(draft: Draft) -> str:
    cut = ", cut off at the token limit" if draft.truncated else ""
    return f"[rejected draft: {draft.words} words{cut}; text removed]"


def call_placeholder(draft: Draft) -> str:
    """A native write's ``content`` once its draft gives way: the counts and a fingerprint of the text (the
    reference's shape, so a model can tell two removed drafts apart)."""
    digest = hashlib.sha256(draft.text.encode("utf-8")).hexdigest()[:16]
    counts = f"words={draft.words}; target={draft.target}; sha256={digest}"
    return f"[rejected draft removed from the conversation; {counts}]"


def holds_text(messages: list[Message], draft: Draft) -> bool:
    """Whether ``draft``'s text is still in full where it was written."""
    message = messages[draft.message]
    if draft.call_id is None:
        return bool(message.get("content") == draft.text)
    for call in message.get("tool_calls") or []:
        if call.get("id") == draft.call_id:
            try:
                return bool(json.loads(call["function"]["arguments"]).get("content") == draft.text)
            except (ValueError, AttributeError):
                return False
    return False


def compact(messages: list[Message], draft: Draft) -> None:
    """Replace ``draft``'s text in ``messages`` by its placeholder (a native call's other arguments stay)."""
    if draft.call_id is None:
        messages[draft.message] = {"role": "assistant", "content": placeholder(draft)}
        return
    message = dict(messages[draft.message])
    calls = []
    for call in message.get("tool_calls") or []:
        if call.get("id") == draft.call_id:
            arguments = json.loads(call["function"]["arguments"])
            arguments["content"] = call_placeholder(draft)
            call = {**call, "function": {**call["function"], "arguments": json.dumps(arguments, ensure_ascii=False)}}
        calls.append(call)
    message["tool_calls"] = calls
    messages[draft.message] = message


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
        if draft.distance <= CLOSER * self.kept.distance and draft.text != self.kept.text:
            compact(messages, self.kept)
            self.kept = draft
            return True
        compact(messages, draft)
        return False

    def settle(self, messages: list[Message]) -> bool:
        """A write was accepted: the rejected draft still in full gives way to its placeholder (the
        reference's rule); True if one did."""
        if self.kept is None or not holds_text(messages, self.kept):
            return False
        compact(messages, self.kept)
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
