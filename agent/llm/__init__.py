"""One call shape over every backend: ``llm.generate(messages, output_type, ...)``.

``open_llm`` picks the backend (``agent.llm.backends``): ``endpoint`` (any OpenAI-compatible server,
vLLM first) or ``embedded`` (in process, no server: the tiny default model on llama.cpp, with
transformers + Outlines as the second engine, ``agent.llm.embedded_engines``), or one a plugin
registers. Heavy dependencies are imported only by the backend that needs them.
"""

from __future__ import annotations

import os
from typing import Literal

from agent.llm.base import LLM, Recorder, Request
from agent.llm.constraints import Choice, JsonSchema, OutputType, Regex
from agent.llm.types import (
    AuthenticationError,
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
    """Open a model from Python. Unset arguments fall back to the environment
    (``FABULA_ENDPOINT``, ``FABULA_MODEL``, ``FABULA_API_KEY``, ``FABULA_CALL_TIMEOUT``,
    ``FABULA_MAX_REPLY_MIB``, ``FABULA_ALLOW_UNCONSTRAINED``) through
    :func:`agent.llm.options.resolve`, the one place that rule lives; with no endpoint anywhere
    the embedded default is used. (The CLI resolves its own flags, the config file and a run's
    record with the same function, and opens the result: it never calls this.)

    An endpoint is probed as it opens (``probe="full"``: what it is, what it serves, what it
    enforces; the findings are ``llm.probe``); ``"light"`` asks only what it is and serves.
    ``routing_key`` travels with every request so a router keeps them on one replica.
    """
    from agent.llm.options import ModelChoiceError, ModelFlags, resolve

    flags = ModelFlags(
        backend=backend,
        endpoint=endpoint,
        model=model,
        api_key=api_key,
        thinking=thinking,
        call_timeout_s=call_timeout_s,
        allow_unconstrained=allow_unconstrained,
    )
    try:
        options = resolve(flags, environ=os.environ)
    except ModelChoiceError as exc:
        raise LLMError(str(exc)) from None
    return options.open(probe=probe, routing_key=routing_key)


__all__ = [
    "LLM",
    "AuthenticationError",
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
