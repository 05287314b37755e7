"""One call shape over every backend: ``llm.generate(messages, output_type, ...)``.

``open_llm`` picks the backend: ``endpoint`` (any OpenAI-compatible server, vLLM first) or
``embedded`` (transformers + Outlines in-process, the tiny default model, no server).
Heavy dependencies are imported only by the backend that needs them.
"""

from __future__ import annotations

import os
from typing import Literal

from agent.llm.base import LLM, Recorder, Request
from agent.llm.constraints import Choice, JsonSchema, OutputType, Regex
from agent.llm.types import (
    CallRecord,
    Completion,
    EndpointUnavailableError,
    LLMError,
    LLMSetupError,
    Message,
    OutputValidationError,
    ThinkingMode,
    TruncatedOutputError,
    UnsupportedSettingError,
    Usage,
)

BackendName = Literal["embedded", "endpoint"]


def open_llm(
    backend: BackendName | None = None,
    *,
    model: str | None = None,
    endpoint: str | None = None,
    api_key: str | None = None,
    thinking: ThinkingMode = "auto",
    probe: Literal["off", "light", "full"] = "full",
    call_timeout_s: float | None = None,
    allow_unconstrained: bool | None = None,
    routing_key: str | None = None,
) -> LLM:
    """Open a model. Unset arguments fall back to ``FABULA_ENDPOINT``, ``FABULA_MODEL``,
    ``FABULA_API_KEY`` (:func:`agent.llm.options.resolve`, the one place that rule lives),
    ``FABULA_CALL_TIMEOUT`` (seconds per call, all retries included), ``FABULA_MAX_REPLY_MIB``
    (the cap on one reply's size, default 32) and ``FABULA_ALLOW_UNCONSTRAINED=1``; with no
    endpoint anywhere the embedded default is used.

    An endpoint is probed as it opens (``probe="full"``: what it is, what it serves, what it
    enforces; the findings are ``llm.probe``); ``"light"`` asks only what it is and serves.
    ``routing_key`` travels with every request so a router keeps them on one replica.
    """
    from agent.llm.options import resolve

    options = resolve(backend=backend, endpoint=endpoint, model=model, api_key=api_key)
    if options.backend == "endpoint":
        if not options.endpoint:
            raise LLMSetupError("the endpoint backend needs --endpoint URL (or FABULA_ENDPOINT)")
        from agent.llm.endpoint import EndpointLLM

        if call_timeout_s is None:
            call_timeout_s = _env_seconds("FABULA_CALL_TIMEOUT", 600.0)
        if allow_unconstrained is None:
            allow_unconstrained = os.environ.get("FABULA_ALLOW_UNCONSTRAINED", "") in ("1", "true", "yes")
        cap_mib = _env_seconds("FABULA_MAX_REPLY_MIB", 32.0)  # same bounds check: a positive number
        return EndpointLLM(options.endpoint, options.model, api_key=options.api_key, thinking=thinking,
                           timeout_s=call_timeout_s, probe=probe, allow_unconstrained=allow_unconstrained,
                           max_response_bytes=max(int(cap_mib * 2**20), 1024), routing_key=routing_key)
    if options.backend == "embedded":
        from agent.llm.embedded import EmbeddedLLM

        return EmbeddedLLM(options.model, thinking=thinking)
    raise LLMSetupError(f"unknown backend {options.backend!r}; use embedded or endpoint")


def _env_seconds(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise LLMError(f"{name} must be a number, got {raw!r}") from None
    if not 0 < value <= 86400:
        raise LLMError(f"{name} must be between 0 and 86400, got {raw}")
    return value


__all__ = [
    "LLM",
    "CallRecord",
    "Choice",
    "Completion",
    "EndpointUnavailableError",
    "JsonSchema",
    "LLMError",
    "LLMSetupError",
    "Message",
    "OutputType",
    "OutputValidationError",
    "Recorder",
    "Regex",
    "Request",
    "ThinkingMode",
    "TruncatedOutputError",
    "UnsupportedSettingError",
    "Usage",
    "open_llm",
]
