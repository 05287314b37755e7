"""The native tool protocol as plain chat text, for the in-process engines (Hermes/Qwen convention).

A server with a tool parser (vLLM ``--tool-call-parser hermes``) takes OpenAI ``tools``, describes them
to the model and reads ``<tool_call>`` blocks back as ``tool_calls``; the embedded engines have no
server, so this module does both ends in text:

- :func:`chat_messages` turns a native-protocol conversation (``tools``, assistant ``tool_calls``,
  ``role: tool`` results) into ``{"role", "content"}`` messages that any chat template renders: the
  tools described in the system message (a ``<tools>`` block of their JSON specs and how to call
  one), each assistant call written as a ``<tool_call>`` block after its text, and each run of tool
  results joined into ONE user message of ``<tool_response>`` blocks, so the rendered list keeps
  strict user/assistant alternation (Gemma's template, SmolLM2's ChatML one);
- :func:`read_tool_reply` reads the model's reply: every ``<tool_call>{json}</tool_call>`` block
  becomes a :class:`~agent.llm.types.ToolCall`, the text outside them the content.

Why always text, even for a template that renders ``tools=`` itself (Qwen3's writes the same Hermes
blocks): one behaviour on every model, so the token counter, the prompt decoded and the parser agree
by construction; a template-native rendering would be a second road per family for no gain in what
the model reads.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Sequence
from typing import Any

from agent.llm.roles import add_turn
from agent.llm.types import Message, ToolCall, ToolSpec

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>", "</tool_response>"

_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)
"""A call block; the last one may lack its close tag (the model stopped right after the JSON)."""
_THINK_HEAD = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)

TOOLS_INTRO = (
    "# Tools\n\n"
    "Besides answering in text, you can call functions. Each function you may call is described below "
    "as a JSON object, inside <tools></tools>:\n<tools>\n{specs}\n</tools>\n\n"
    "To call one, write a <tool_call></tool_call> block holding one JSON object with the function's "
    "name and its arguments, and nothing else inside the block:\n"
    '<tool_call>\n{{"name": "function_name", "arguments": {{"argument": "value"}}}}\n</tool_call>\n'
    "Write one block per call; you may write several. The results come back inside "
    "<tool_response></tool_response> blocks."
)


def uses_tools(messages: Sequence[Message], tools: Sequence[ToolSpec] | None) -> bool:
    """Whether rendering changes anything: tools offered, or tool calls or results in the history."""
    return bool(tools) or any(m.get("role") == "tool" or m.get("tool_calls") for m in messages)


def chat_messages(messages: Sequence[Message], tools: Sequence[ToolSpec] | None = None) -> list[Message]:
    """``messages`` (in the role order of :func:`agent.llm.roles.role_order_error`) as plain chat
    messages; unchanged (a copy of the list) when neither tools nor tool messages are involved, so a
    request without tools is rendered exactly as before."""
    if not uses_tools(messages, tools):
        return list(messages)
    out: list[Message] = []
    rest = list(messages)
    system = rest.pop(0)["content"] if rest and rest[0].get("role") == "system" else None
    if tools:
        block = TOOLS_INTRO.format(specs="\n".join(json.dumps(spec, ensure_ascii=False) for spec in tools))
        system = f"{system}\n\n{block}" if system else block
    if system is not None:
        out.append({"role": "system", "content": system})
    for message in rest:
        role = message.get("role")
        if role == "tool":
            # a run of results (and a user turn right after it) joins into one user message
            add_turn(out, "user", f"{RESPONSE_OPEN}\n{message.get('content', '')}\n{RESPONSE_CLOSE}")
        elif role == "assistant" and message.get("tool_calls"):
            blocks = [_call_block(entry) for entry in message["tool_calls"]]
            add_turn(out, "assistant", "\n".join([*([message["content"]] if message.get("content") else []), *blocks]))
        else:
            add_turn(out, str(role), message.get("content", ""))
    return out


def _call_block(entry: Any) -> str:
    """One wire ``tool_calls`` entry as the model would have written it."""
    function = entry.get("function", {}) if isinstance(entry, dict) else {}
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError):  # not JSON: kept as the string it was, as the model wrote it
            arguments = json.loads(arguments)
    body = json.dumps({"name": function.get("name", ""), "arguments": arguments}, ensure_ascii=False)
    return f"{CALL_OPEN}\n{body}\n{CALL_CLOSE}"


def read_tool_reply(
    text: str, finish_reason: str, messages: Sequence[Message]
) -> tuple[str, str, tuple[ToolCall, ...]]:
    """A reply to a request that offered tools: ``(content, finish_reason, calls)``.

    Every well-formed block (JSON object with a string ``name``; ``arguments`` an object, kept as
    JSON text, or a string, kept as written; absent: ``{}``) becomes a call with an id ``call_<n>``
    not used yet in ``messages``; the content is the text outside those blocks, stripped. A block
    whose JSON does not parse stays in the content as written: the caller then sees a text reply
    (with the model's broken attempt in it) instead of a call with made-up arguments, the same as
    a server whose parser fails. A leading ``<think>`` block is never searched for calls. The finish
    reason becomes ``tool_calls`` when any call was read (as a server reports it)."""
    head_match = _THINK_HEAD.match(text)
    head = head_match.group(0) if head_match else ""
    body = text[len(head) :]
    taken = {
        call.get("id")
        for m in messages
        for call in (m.get("tool_calls") or [])
        if isinstance(call, dict) and isinstance(call.get("id"), str)
    }
    counter = sum(len(m.get("tool_calls") or []) for m in messages)
    calls: list[ToolCall] = []
    kept: list[str] = []
    last = 0
    for match in _CALL_BLOCK.finditer(body):
        parsed = _parsed_call(match.group(1))
        if parsed is None:
            continue  # the block stays in the content
        while f"call_{counter}" in taken:
            counter += 1
        calls.append(ToolCall(f"call_{counter}", *parsed))
        taken.add(f"call_{counter}")
        kept.append(body[last : match.start()])
        last = match.end()
    if not calls:
        return text, finish_reason, ()
    kept.append(body[last:])
    content = "".join(kept).strip()
    return (f"{head}\n\n{content}" if head and content else head or content), "tool_calls", tuple(calls)


def _parsed_call(block: str) -> tuple[str, str] | None:
    """``(name, arguments JSON text)`` from a block's inside; ``None``: not a well-formed call."""
    try:
        data = json.loads(block.strip())
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("name"), str) or not data["name"]:
        return None
    arguments = data.get("arguments", data.get("parameters", {}))
    if isinstance(arguments, str):
        return data["name"], arguments
    if not isinstance(arguments, dict):
        return None
    return data["name"], json.dumps(arguments, ensure_ascii=False)
