"""Where a constraint goes in the request body, per server kind.

Servers agree on ``response_format`` (json_schema) for JSON and disagree on the rest:
vLLM takes ``structured_outputs.regex`` / ``.choice``; SGLang takes a top-level ``regex``
(and has no choice field: a choice is an alternation regex); llama.cpp's server takes a GBNF
``grammar`` (a choice is a one-rule grammar; a regex has no field, so it travels unconstrained
and is validated after decoding — the probe records that). Unknown servers get vLLM's shape.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.llm.constraints import Constraint


def json_field(constraint: Constraint) -> dict[str, Any]:
    return {"response_format": {"type": "json_schema", "json_schema": {
        "name": constraint.name, "schema": constraint.decoding_schema, "strict": True}}}


def regex_field(kind: str, pattern: str) -> dict[str, Any]:
    """The body field carrying a regex constraint for a server of ``kind`` (empty: none exists)."""
    if kind == "sglang":
        return {"regex": pattern}
    if kind in ("llama.cpp", "ollama"):
        return {}
    return {"structured_outputs": {"regex": pattern}}


def choice_field(kind: str, options: tuple[str, ...]) -> dict[str, Any]:
    """The body field carrying a choice among fixed strings for a server of ``kind``."""
    if kind == "sglang":
        return {"regex": "|".join(re.escape(o) for o in options)}
    if kind == "llama.cpp":
        return {"grammar": "root ::= " + " | ".join(json.dumps(o) for o in options)}
    if kind == "ollama":
        return {}
    return {"structured_outputs": {"choice": list(options)}}


def regex_supported(kind: str) -> bool:
    """Whether a server of ``kind`` has any field for a regex constraint."""
    return bool(regex_field(kind, "x"))
