"""How a server that enforces every constraint answers fabula's probe requests, for the
scripted test servers (so a probe never consumes a scripted reply)."""

from __future__ import annotations

import json
from typing import Any

from agent.llm.probe import PROBE_ASK, RANGE_ASK, RANGE_MIN


def probe_reply(body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """``(status, reply)`` for a probe request, ``None`` for any other request."""
    if body.get("messages") not in (PROBE_ASK, RANGE_ASK):
        return None
    if body.get("min_tokens", 0) > body.get("max_tokens", 1):
        return 400, {"error": {"message": "min_tokens must be less than or equal to max_tokens"}}
    if "fabula_range" in json.dumps(body):
        text = json.dumps({"n": RANGE_MIN})
    elif "response_format" in body:
        text = json.dumps({"fabula_probe": "qx7"})
    else:
        text = "qx70"
    return 200, {"model": body.get("model"), "choices": [{"message": {"content": text}, "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 9, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 0}}}
