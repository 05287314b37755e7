"""Where a constraint and the other per-server settings go in a chat request, per server kind.

Servers agree on the OpenAI chat body and disagree on the rest, and most of them answer
HTTP 200 to a field they do not read, so the shape must follow the server the probe found:

- vLLM: ``response_format`` (json_schema) and ``structured_outputs.regex`` / ``.choice``.
- SGLang: ``response_format``, a top-level ``regex`` (a choice is an alternation regex).
- llama.cpp (``llama-server`` and llama-cpp-python's server): ``response_format`` of type
  ``json_object`` with a ``schema`` (llama-cpp-python refuses ``json_schema``; llama-server takes
  both) and a GBNF ``grammar`` for a choice; a regex has no field, so it travels unconstrained
  and is validated after decoding (the probe records that).
- TGI: ``response_format`` is its own tagged grammar, ``{"type": "json"|"regex", "value": ...}``.
- Ollama: its native ``/api/chat``, because only there can a request set the context size
  (``options.num_ctx``; the OpenAI route silently truncates at the server's default), the schema
  (``format``) and the thinking switch (``think``). Requests are built in the OpenAI shape and
  translated here, and replies translated back, so the rest of the backend sees one shape.

These mirror Outlines' own per-server adapters (outlines.models.vllm / sglang / tgi / ollama),
which are not imported because the endpoint backend runs on a base install without Outlines;
``tests/test_server_shapes.py`` checks the two agree where Outlines is installed.
"""

from __future__ import annotations

import json
import re
from typing import Any

KINDS = ("vllm", "sglang", "llama.cpp", "llama-cpp-python", "ollama", "tgi", "other")
LLAMA_CPP = ("llama.cpp", "llama-cpp-python")
OLLAMA_NUM_CTX_CAP = 8192
"""The context fabula asks Ollama for when the model allows more: Ollama allocates the whole KV
cache for ``num_ctx`` up front, so the model's full 128K would not fit most machines."""

_OLLAMA_OPTIONS = {"temperature": "temperature", "max_tokens": "num_predict", "seed": "seed", "stop": "stop",
                   "top_p": "top_p", "top_k": "top_k", "min_p": "min_p", "repetition_penalty": "repeat_penalty",
                   "frequency_penalty": "frequency_penalty", "presence_penalty": "presence_penalty"}


def json_field(kind: str, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The body field carrying a JSON-schema constraint for a server of ``kind``."""
    if kind in LLAMA_CPP:
        return {"response_format": {"type": "json_object", "schema": schema}}
    if kind == "tgi":
        return {"response_format": {"type": "json", "value": schema}}
    return {"response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema,
                                                                       "strict": True}}}


def regex_field(kind: str, pattern: str) -> dict[str, Any]:
    """The body field carrying a regex constraint for a server of ``kind`` (empty: none exists)."""
    if kind == "sglang":
        return {"regex": pattern}
    if kind == "tgi":
        return {"response_format": {"type": "regex", "value": pattern}}
    if kind in (*LLAMA_CPP, "ollama"):
        return {}
    return {"structured_outputs": {"regex": pattern}}


def choice_field(kind: str, options: tuple[str, ...]) -> dict[str, Any]:
    """The body field carrying a choice among fixed strings for a server of ``kind``."""
    if kind in ("sglang", "tgi"):
        return regex_field(kind, "|".join(re.escape(o) for o in options))
    if kind in LLAMA_CPP:
        return {"grammar": "root ::= " + " | ".join(json.dumps(o) for o in options)}
    if kind == "ollama":
        return {}
    return {"structured_outputs": {"choice": list(options)}}


def regex_supported(kind: str) -> bool:
    """Whether a server of ``kind`` has any field for a regex constraint."""
    return bool(regex_field(kind, "x"))


def thinking_field(kind: str, enable: bool | None) -> dict[str, Any]:
    """The switch for a model's thinking (``None``: leave the model's default)."""
    if enable is None or kind in ("tgi", "llama-cpp-python"):  # neither reads a chat-template switch
        return {}
    if kind == "ollama":
        return {"think": enable}
    return {"chat_template_kwargs": {"enable_thinking": enable}}


# -- Ollama's native route ------------------------------------------------------------------
def chat_url(kind: str, base_url: str) -> str:
    """Where chat requests go: ``/chat/completions`` under ``/v1``, Ollama's ``/api/chat`` at its root."""
    if kind == "ollama":
        return base_url.removesuffix("/v1") + "/api/chat"
    return "/chat/completions"


def streams_structured(kind: str) -> bool:
    """Whether a structured request to a server of ``kind`` is streamed, so that a reply that runs
    away is cut as it is written (:mod:`agent.llm.stream`): vLLM, whose stream carries token counts
    on every piece (``continuous_usage_stats``) and which aborts a request whose client left."""
    return kind == "vllm"


def to_wire(kind: str, body: dict[str, Any], *, context_tokens: int | None = None) -> dict[str, Any]:
    """``body`` (OpenAI-shaped) as the server of ``kind`` takes it: unchanged except for Ollama."""
    if kind != "ollama":
        return body
    options = {ollama: body[ours] for ours, ollama in _OLLAMA_OPTIONS.items() if body.get(ours) is not None}
    if context_tokens:
        options["num_ctx"] = context_tokens
    wire: dict[str, Any] = {"model": body["model"], "messages": body["messages"], "stream": False,
                            "options": options}
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
        wire["format"] = response_format["json_schema"]["schema"]
    if "think" in body:
        wire["think"] = body["think"]
    return wire


def from_wire(kind: str, reply: Any) -> Any:
    """A server's reply in the OpenAI shape the backend reads (Ollama's native reply translated)."""
    if kind != "ollama" or not isinstance(reply, dict) or "choices" in reply:
        return reply
    message = reply.get("message") if isinstance(reply.get("message"), dict) else {}
    out_message: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if isinstance(message.get("thinking"), str) and message["thinking"]:
        out_message["reasoning_content"] = message["thinking"]
    return {"model": reply.get("model"),
            "choices": [{"message": out_message, "finish_reason": reply.get("done_reason") or "unknown"}],
            "usage": {"prompt_tokens": reply.get("prompt_eval_count", 0),
                      "completion_tokens": reply.get("eval_count", 0)}}
