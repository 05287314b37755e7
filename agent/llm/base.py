"""The one call shape every backend shares.

A backend implements :meth:`LLM._complete` (one request in, one raw reply out). Everything
that must hold for every backend lives here, once: argument checks, refusing to parse a
truncated structured reply, validating every parsed object again, separating reasoning
text from the answer, timing, and the recording hook.
"""

from __future__ import annotations

import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.llm import heartbeat
from agent.llm.constraints import Constraint, OutputType, to_constraint
from agent.llm.context import TokenCounter
from agent.llm.roles import role_order_error
from agent.llm.sampling import NONE, Sampling
from agent.llm.types import (
    CallRecord,
    Completion,
    LLMError,
    Message,
    RawReply,
    ThinkingMode,
    ToolSpec,
    TruncatedOutputError,
)
from agent.repetition import is_looping

Recorder = Callable[[CallRecord], None]
Outcome = tuple[RawReply | LLMError, float]
"""A request already sent: its raw reply (or why it failed) and its latency in seconds
(what a backend that decodes several requests together hands :meth:`LLM._run`)."""

REASONING_ALLOWANCE = 1024
"""Tokens added to every call's ``max_tokens`` when thinking is on: the model reasons first and
then answers under the grammar (vLLM applies structured outputs after the reasoning ends), so a
budget sized for the answer alone would be spent on the reasoning and the answer cut."""

_THINK_BLOCK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)


@dataclass
class Request:
    """One independent request, for :meth:`LLM.generate_many`."""

    messages: list[Message]
    output_type: OutputType = None
    temperature: float = 0.7
    max_tokens: int = 256
    min_tokens: int | None = None
    stop: list[str] | None = None
    seed: int | None = None
    role: str | None = None
    constraint: Constraint | None = field(default=None, repr=False)
    sampling: Sampling = NONE
    tools: list[ToolSpec] | None = None
    """Tools offered natively (OpenAI ``tools``): the reply may call them instead of answering in text;
    never together with ``output_type`` (a native tool call is the server's to parse)."""
    tool_choice: str | None = None
    """``auto`` (the model decides) when ``tools`` are offered; ``None`` otherwise."""
    ask_again_if_looped: bool = True
    """A structured reply that looped is asked again once with a firmer penalty; ``False``: the
    caller has a fallback of its own, and the looped reply fails at once."""


class LLM(ABC):
    """A chat model behind one call shape: ``generate(messages, output_type, ...)``."""

    backend: str = "abstract"

    def __init__(self, model: str, *, thinking: ThinkingMode = "auto") -> None:
        if thinking not in ("off", "on", "auto"):
            raise ValueError(f"thinking must be off, on or auto, not {thinking!r}")
        self.model = model
        self.thinking: ThinkingMode = thinking
        self.recorders: list[Recorder] = []
        self.sampling_policy: Callable[[str | None], Sampling] | None = None
        """Sampling for a request that sets none, by its role (a pipeline's per-role defaults)."""

    # -- the public call shape -------------------------------------------------------
    def generate(
        self,
        messages: Sequence[Message],
        output_type: OutputType = None,
        *,
        temperature: float,
        max_tokens: int,
        min_tokens: int | None = None,
        stop: list[str] | None = None,
        seed: int | None = None,
        role: str | None = None,
        sampling: Sampling | None = None,
        tools: list[ToolSpec] | None = None,
        ask_again_if_looped: bool = True,
    ) -> Completion:
        """Generate one reply; with ``output_type`` the reply is constrained and ``parsed`` is set;
        with ``tools`` (the native tool protocol, ``tool_choice`` auto) it may carry ``tool_calls``.

        A structured reply cut at ``max_tokens`` because it looped (a string field repeating) is
        retried once with a firmer repetition penalty (a second, recorded call), unless
        ``ask_again_if_looped`` is off."""
        request = Request(
            list(messages),
            output_type,
            temperature,
            max_tokens,
            min_tokens,
            stop,
            seed,
            role,
            sampling=sampling or NONE,
            tools=list(tools) if tools else None,
            tool_choice="auto" if tools else None,
            ask_again_if_looped=ask_again_if_looped,
        )
        return self._run(self._prepare(request))

    def generate_many(
        self, requests: Sequence[Request], *, return_exceptions: bool = False
    ) -> list[Completion | LLMError]:
        """Run independent requests; backends that can batch (a server) run them concurrently.

        Results keep the order of ``requests``. With ``return_exceptions`` a failed request
        yields its :class:`LLMError` in place; otherwise the first failure is raised after
        every request has finished (so no reply that was paid for is silently dropped).
        """
        prepared = [self._prepare(r) for r in requests]
        results = self._run_many(prepared)
        if not return_exceptions:
            for result in results:
                if isinstance(result, LLMError):
                    raise result
        return results

    def close(self) -> None:
        """Release backend resources (HTTP connections, model memory)."""
        return None

    @property
    def parameter_count(self) -> int | None:
        """The model's size in parameters where the backend knows it (``None``: unknown); it lets
        ``--profile auto`` give a tiny model the small profile (:mod:`agent.llm.size`)."""
        return None

    @property
    def context_length(self) -> int | None:
        """The context a server reports for this model, in tokens (``None``: it says nothing)."""
        return None

    @property
    def model_context(self) -> int | None:
        """The context the model's own configuration gives, in tokens (``None``: unknown)."""
        return None

    def token_counter(self) -> TokenCounter | None:
        """A counter of chat requests as this model sees them (its tokenizer, its server's
        ``/tokenize``); ``None``: the backend has none and a run estimates (``agent.llm.context``)."""
        return None

    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what a backend provides ---------------------------------------------------------
    @abstractmethod
    def _complete(self, request: Request) -> RawReply:
        """Send one prepared request and return the raw reply (no parsing)."""

    def _run_many(self, requests: list[Request]) -> list[Completion | LLMError]:
        """Default: one after another. Servers override this to send them concurrently."""
        results: list[Completion | LLMError] = []
        for request in requests:
            try:
                results.append(self._run(request))
            except LLMError as exc:
                results.append(exc)
        return results

    def applied_sampling(self, sampling: Sampling) -> Sampling:
        """The controls of ``sampling`` this backend applies (what the ledger records): all of them,
        unless a backend says otherwise."""
        return sampling

    # -- shared machinery ----------------------------------------------------------------
    def _prepare(self, request: Request) -> Request:
        if request.sampling == NONE and self.sampling_policy is not None:
            request.sampling = self.sampling_policy(request.role)
        request.sampling = self.applied_sampling(request.sampling)
        _check_arguments(request)
        request.constraint = to_constraint(request.output_type)
        if self.thinking == "on":
            request.max_tokens += REASONING_ALLOWANCE
        return request

    def _run(self, request: Request, sent: Outcome | None = None) -> Completion:
        """One request; a structured reply that looped until ``max_tokens`` is asked again once,
        with a firmer repetition penalty (both calls are recorded; not with ``ask_again_if_looped``
        off). ``sent``: the first call's outcome when the backend has already made it (alongside
        others); the retry is its own."""
        try:
            return self._run_once(request, sent)
        except TruncatedOutputError as exc:
            if not exc.looped or not request.ask_again_if_looped:
                raise
            retry = Request(
                request.messages,
                request.output_type,
                request.temperature,
                request.max_tokens,
                request.min_tokens,
                request.stop,
                request.seed,
                request.role,
                constraint=request.constraint,
                sampling=request.sampling.stronger(),
                tools=request.tools,
                tool_choice=request.tool_choice,
            )
            return self._run_once(retry)

    def _run_once(self, request: Request, sent: Outcome | None = None) -> Completion:
        started = time.perf_counter()
        raw: RawReply | None = None
        took = 0.0
        try:
            if sent is None:
                with heartbeat.watched(request.role):
                    raw = self._complete(request)
                took = time.perf_counter() - started
            else:
                answer, took = sent
                if isinstance(answer, LLMError):
                    raise answer
                raw = answer
            completion = self._finish(request, raw, took)
        except LLMError as exc:
            self._record(request, raw, took if sent is not None else time.perf_counter() - started, error=str(exc))
            raise
        self._record(request, raw, completion.latency_s, error=None)
        return completion

    def _finish(self, request: Request, raw: RawReply, latency_s: float) -> Completion:
        text, reasoning = split_reasoning(raw.text, raw.reasoning)
        parsed: Any = None
        constraint = request.constraint
        if constraint is not None:
            if raw.finish_reason == "length" or raw.runaway:
                looped = raw.runaway or is_looping(text)
                cut = (
                    f"ran away and was stopped after {raw.usage.completion_tokens} tokens "
                    f"(max_tokens={request.max_tokens})"
                    if raw.runaway
                    else f"was cut at max_tokens={request.max_tokens} after {raw.usage.completion_tokens} tokens"
                )
                raise TruncatedOutputError(
                    f"{constraint.name} reply {cut}"
                    + ("; it repeated itself" if looped else "; raise max_tokens or shorten the output"),
                    looped=looped,
                )
            parsed = constraint.parse(text.strip() if constraint.kind == "json" else text)
        return Completion(
            text=text,
            finish_reason=raw.finish_reason,
            usage=raw.usage,
            latency_s=latency_s,
            model=raw.model,
            parsed=parsed,
            reasoning=reasoning,
            tool_calls=raw.tool_calls,
        )

    def _record(self, request: Request, raw: RawReply | None, latency_s: float, error: str | None) -> None:
        if not self.recorders:
            return
        usage = raw.usage if raw is not None else None
        record = CallRecord(
            role=request.role,
            backend=self.backend,
            model=raw.model if raw is not None else self.model,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            schema_name=request.constraint.name if request.constraint else None,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            cached_prompt_tokens=usage.cached_prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            latency_s=latency_s,
            finish_reason=raw.finish_reason if raw is not None else None,
            error=error,
            sampling=request.sampling.given() or None,
            min_tokens=request.min_tokens,
            messages=request.messages,
            text=raw.text if raw is not None else None,
            reasoning=split_reasoning(raw.text, raw.reasoning)[1] if raw is not None else None,
            timing=raw.timing if raw is not None else None,
            tool_calls=[call.wire() for call in raw.tool_calls] if raw is not None and raw.tool_calls else None,
            tools=[tool["function"]["name"] for tool in request.tools] if request.tools else None,
        )
        for recorder in self.recorders:
            recorder(record)


def split_reasoning(text: str, reasoning: str | None) -> tuple[str, str | None]:
    """Separate a leading ``<think>...</think>`` block from the answer.

    Servers with a reasoning parser already return reasoning apart; without one a
    Qwen3-class model writes it inline, and it must never be parsed as the answer.
    """
    match = _THINK_BLOCK.match(text)
    if match is None:
        return text, reasoning
    inline = match.group(1).strip()
    return text[match.end() :], (reasoning + "\n" + inline) if reasoning else inline


def _check_arguments(request: Request) -> None:
    if not request.messages:
        raise ValueError("messages must not be empty")
    for message in request.messages:
        if message.get("role") not in ("system", "user", "assistant", "tool") or not isinstance(
            message.get("content"), str
        ):
            raise ValueError(f"bad message (need role system/user/assistant/tool and string content): {message!r}")
        if message["role"] == "tool" and not isinstance(message.get("tool_call_id"), str):
            raise ValueError(f"a tool message names the call it answers (tool_call_id): {message!r}")
    if request.tools and request.output_type is not None:
        raise ValueError("a request offers native tools or constrains its reply, not both")
    order = role_order_error(request.messages)
    if order is not None:
        raise ValueError(order)
    if not 0 <= request.temperature < float("inf"):  # nan and inf too
        raise ValueError(f"temperature must be a finite number >= 0, got {request.temperature}")
    if request.max_tokens < 1:
        raise ValueError(f"max_tokens must be >= 1, got {request.max_tokens}")
    if request.min_tokens is not None and not 0 <= request.min_tokens <= request.max_tokens:
        raise ValueError(f"min_tokens must be between 0 and max_tokens, got {request.min_tokens}")
