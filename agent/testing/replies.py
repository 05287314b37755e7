"""What a fake OpenAI-compatible server sends: a chat completion, a model list, the probe's answers.

Why here: every fake server built these bodies by hand, each a little differently."""

from __future__ import annotations

import json
from typing import Any

from agent.llm.probe import PROBE_ASK, RANGE_ASK, RANGE_MIN


def chat_reply(
    content: Any = "ok",
    finish: str = "stop",
    *,
    model: Any = "m",
    prompt: int = 3,
    completion: int = 1,
    cached: int | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One chat completion; ``cached`` (the prompt tokens the prefix cache served) is left out when None;
    ``tool_calls`` (the OpenAI shape) when the reply calls tools."""
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion}
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "model": model,
        "choices": [{"message": message, "finish_reason": finish}],
        "usage": usage,
    }


def model_list(*models: dict[str, Any]) -> dict[str, Any]:
    """``GET /v1/models``'s reply listing ``models``."""
    return {"object": "list", "data": list(models)}


def probe_reply(body: Any) -> tuple[int, dict[str, Any]] | None:
    """``(status, reply)`` of a server that enforces every constraint, for fabula's probe requests;
    ``None`` for any other request (so a probe never consumes a scripted reply)."""
    if not isinstance(body, dict) or body.get("messages") not in (PROBE_ASK, RANGE_ASK):
        return None
    if body.get("min_tokens", 0) > body.get("max_tokens", 1):
        return 400, {"error": {"message": "min_tokens must be less than or equal to max_tokens"}}
    if "fabula_range" in json.dumps(body):
        text = json.dumps({"n": RANGE_MIN})
    elif "response_format" in body:
        text = json.dumps({"fabula_probe": "qx7"})
    else:
        text = "qx70"
    return 200, chat_reply(text, model=body.get("model"), prompt=9, completion=3, cached=0)
