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
    """What breaks strict alternation in ``messages`` (``None``: the order is right). Under the
    native tool protocol an assistant message with ``tool_calls`` is followed by one ``tool`` message
    per call, and the assistant may then speak again (its next turn) or the user may."""
    roles = [m.get("role") for m in messages]
    start = 1 if roles and roles[0] == "system" else 0
    expected: tuple[str, ...] = ("user",)
    for where in range(start, len(roles)):
        role, message = roles[where], messages[where]
        if role not in expected:
            return (
                f"message {where} is {role!r} where {' or '.join(map(repr, expected))} must come (roles must "
                f"alternate user/assistant after one optional system message, tool results after the assistant "
                f"message that called them): {' '.join(map(str, roles))}"
            )
        if role == "user":
            expected = ("assistant",)
        elif role == "assistant":
            expected = ("tool",) if message.get("tool_calls") else ("user",)
        else:
            expected = ("tool", "assistant", "user")
    return None
