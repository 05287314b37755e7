"""One call shape over every backend: ``llm.generate(messages, output_type, ...)``.

``open_llm`` picks the backend: ``endpoint`` (any OpenAI-compatible server, vLLM first) or
``embedded`` (transformers + Outlines in-process, the tiny default model, no server).
Heavy dependencies are imported only by the backend that needs them.
"""

from __future__ import annotations

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
) -> LLM:
    """Open a model. Unset arguments fall back to ``FABULA_ENDPOINT``, ``FABULA_MODEL``,
    ``FABULA_API_KEY``; with no endpoint anywhere the embedded default is used
    (:func:`agent.llm.options.resolve`, the one place that rule lives)."""
    from agent.llm.options import resolve

    options = resolve(backend=backend, endpoint=endpoint, model=model, api_key=api_key)
    if options.backend == "endpoint":
        if not options.endpoint:
            raise LLMSetupError("the endpoint backend needs --endpoint URL (or FABULA_ENDPOINT)")
        from agent.llm.endpoint import EndpointLLM

        return EndpointLLM(options.endpoint, options.model, api_key=options.api_key, thinking=thinking)
    if options.backend == "embedded":
        from agent.llm.embedded import EmbeddedLLM

        return EmbeddedLLM(options.model, thinking=thinking)
    raise LLMSetupError(f"unknown backend {options.backend!r}; use embedded or endpoint")


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
