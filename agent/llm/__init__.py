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
) -> LLM:
    """Open a model. Unset arguments fall back to ``FABULA_ENDPOINT``, ``FABULA_MODEL``,
    ``FABULA_API_KEY``; with no endpoint anywhere the embedded default is used."""
    endpoint = endpoint or os.environ.get("FABULA_ENDPOINT")
    model = model or os.environ.get("FABULA_MODEL")
    api_key = api_key or os.environ.get("FABULA_API_KEY")
    backend = backend or ("endpoint" if endpoint else "embedded")
    if backend == "endpoint":
        if not endpoint:
            raise LLMError("the endpoint backend needs --endpoint URL (or FABULA_ENDPOINT)")
        from agent.llm.endpoint import EndpointLLM

        return EndpointLLM(endpoint, model, api_key=api_key, thinking=thinking)
    if backend == "embedded":
        from agent.llm.embedded import EmbeddedLLM

        return EmbeddedLLM(model, thinking=thinking)
    raise LLMError(f"unknown backend {backend!r}; use embedded or endpoint")


__all__ = [
    "LLM",
    "CallRecord",
    "Choice",
    "Completion",
    "EndpointUnavailableError",
    "JsonSchema",
    "LLMError",
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
