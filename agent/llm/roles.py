"""Strict role order for chat requests: an optional system message, then user and assistant
turns alternating, starting with the user.

Why: Gemma's chat template (and vLLM with it) refuses any other order with "Conversation roles
must alternate" (a 400 on every retry), while Qwen's accepts it; so the rule is checked for every
request on every backend (:func:`role_order_error`) and conversations grow through
:func:`add_turn`, which merges a turn into the one before it when both have the same role.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.llm.types import Message


def add_turn(messages: list[Message], role: str, content: str) -> None:
    """Append a ``role`` turn, or join it to the last message (a blank line between) when that
    has the same role: never two user (or assistant) turns in a row."""
    if messages and messages[-1]["role"] == role and role != "system":
        messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{content}"}
    else:
        messages.append({"role": role, "content": content})


def role_order_error(messages: Sequence[Message]) -> str | None:
    """What breaks strict alternation in ``messages`` (``None``: the order is right)."""
    roles = [m.get("role") for m in messages]
    body = roles[1:] if roles and roles[0] == "system" else roles
    for i, role in enumerate(body):
        expected = "user" if i % 2 == 0 else "assistant"
        if role != expected:
            where = i + (len(roles) - len(body))
            return (
                f"message {where} is {role!r} where {expected!r} must come (roles must alternate "
                f"user/assistant after one optional system message): {' '.join(map(str, roles))}"
            )
    return None
