"""The plain data that crosses the LLM layer: messages, usage, completions, call records.

Kept free of any backend import so that the store, the pipelines and the tests can use
these types without pulling in torch or an HTTP client.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from agent.errors import FabulaError

Role = Literal["system", "user", "assistant", "tool"]
Message = dict[str, Any]
"""An OpenAI-style chat message: ``{"role": ..., "content": ...}``; under the native tool protocol an
assistant message may also carry ``tool_calls`` (:meth:`ToolCall.wire`) and a ``tool`` message its
``tool_call_id``."""

ToolSpec = dict[str, Any]
"""One tool offered natively, in the OpenAI shape: ``{"type": "function", "function": {"name",
"description", "parameters"}}``."""

ThinkingMode = Literal["off", "on", "auto"]
"""For models with a thinking mode (Qwen3-class): ``off`` asks the chat template to skip
it, ``on`` asks for it, ``auto`` leaves the template's default. Reasoning text is never
parsed as the answer in any mode."""


class LLMError(FabulaError, RuntimeError):
    """Any failure of a model call that a caller may want to report in one line."""


class LLMSetupError(LLMError):
    """The model cannot be opened as asked (no endpoint, an unknown backend): the user's input."""

    exit_code = 2


class TruncatedOutputError(LLMError):
    """A structured reply hit ``max_tokens``: a partial JSON object is never parsed.
    ``looped`` when its text repeated itself (the retry then uses a firmer penalty)."""

    def __init__(self, message: str, *, looped: bool = False) -> None:
        super().__init__(message)
        self.looped = looped


class OutputValidationError(LLMError):
    """A reply did not satisfy its output type even though decoding was constrained."""


class EndpointUnavailableError(LLMError):
    """The server could not be reached (or kept failing) within the retry budget."""


class AuthenticationError(LLMError):
    """The server refused the credentials (HTTP 401/403): no retry or other request can succeed,
    so a pipeline stops at the first one instead of asking again."""


class UnsupportedSettingError(LLMError):
    """A sampling setting the chosen backend cannot honour; refused rather than ignored."""


@dataclass(frozen=True)
class Usage:
    """Token accounting for one call, as the backend reported it."""

    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


TIMING_PARTS = ("restore", "compile", "prefill", "decode", "mask", "sample", "alongside")
"""Where an in-process call's time goes, in order: switching the live KV cache to the saved
prefix that shares most with the prompt; compiling a constraint the process has not seen;
evaluating the prompt tokens the cache did not hold; evaluating each generated token; the logits
processors (penalties, the grammar's token mask); the sampler and the loop around it; and, for a
call decoded together with others (``generate_many``), the time the batch spent on the others
(each forward pass is shared out among the calls in it)."""


@dataclass(frozen=True)
class CallTiming:
    """Seconds per part of one in-process call (:data:`TIMING_PARTS`); what the latency holds
    beyond their sum (templating, detokenizing, checks) is ``other``. Servers report none."""

    restore: float = 0.0
    compile: float = 0.0
    prefill: float = 0.0
    decode: float = 0.0
    mask: float = 0.0
    sample: float = 0.0
    alongside: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {part: round(getattr(self, part), 4) for part in TIMING_PARTS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CallTiming:
        return cls(**{part: float(data.get(part, 0.0)) for part in TIMING_PARTS})

    @property
    def total(self) -> float:
        return sum(getattr(self, part) for part in TIMING_PARTS)


@dataclass(frozen=True)
class ToolCall:
    """One native tool call in a reply. ``arguments`` is the JSON text as the model wrote it: the
    caller parses it, so a malformed one becomes that tool's error result instead of a failed call."""

    id: str
    name: str
    arguments: str

    def wire(self) -> dict[str, Any]:
        """The call as an assistant message's ``tool_calls`` entry (OpenAI shape)."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}

    @classmethod
    def from_wire(cls, entry: Any, fallback_id: str) -> ToolCall | None:
        """A ``tool_calls`` entry read back (``None``: not a function call); arguments given as an
        object (some servers) are written back as JSON text."""
        if not isinstance(entry, dict):
            return None
        function = entry.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return None
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
        call_id = entry.get("id")
        return cls(call_id if isinstance(call_id, str) and call_id else fallback_id, function["name"], arguments)


@dataclass(frozen=True)
class Completion:
    """One model reply. ``parsed`` holds the validated object when an output type was given."""

    text: str
    finish_reason: str
    usage: Usage
    latency_s: float
    model: str
    parsed: Any = None
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    """The reply's native tool calls (only when the request offered ``tools``)."""


@dataclass(frozen=True)
class RawReply:
    """What a backend hands back before the shared layer checks and parses it."""

    text: str
    finish_reason: str
    usage: Usage
    model: str
    reasoning: str | None = None
    runaway: bool = False
    """The backend stopped a structured reply because it ran away (:func:`agent.repetition.ran_away`):
    it counts as cut at ``max_tokens`` and looped, so the shared layer asks once more."""
    timing: CallTiming | None = None
    """Where the call's time went (in-process engines only)."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Native tool calls the backend read from the reply."""


@dataclass(frozen=True)
class CallRecord:
    """Everything the run store keeps about one call (the recording hook's payload)."""

    role: str | None
    backend: str
    model: str
    temperature: float
    max_tokens: int
    schema_name: str | None
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int
    latency_s: float
    finish_reason: str | None
    error: str | None = None
    messages: list[Message] = field(default_factory=list)
    text: str | None = None
    sampling: dict[str, Any] | None = None
    """The sampling controls the call was made with (only those set)."""
    min_tokens: int | None = None
    """The floor on completion tokens the call asked for (None: none)."""
    reasoning: str | None = None
    """The model's reasoning before its answer (``--thinking on``): kept in the ledger, never sent
    back to the model (the conversation carries the answer only)."""
    timing: CallTiming | None = None
    """Where the call's time went (in-process engines; ``None`` for servers)."""
    tool_calls: list[dict[str, Any]] | None = None
    """The reply's native tool calls (:meth:`ToolCall.wire`), when it made any."""
    tools: list[str] | None = None
    """The names of the tools the request offered natively (``None``: none)."""


EMBEDDED_ENGINES = ("auto", "llama.cpp", "transformers")
"""The embedded backend's engines: ``auto`` picks llama.cpp where it is installed
(``agent.llm.embedded_engines``); the option layer checks a setting against the same names."""
