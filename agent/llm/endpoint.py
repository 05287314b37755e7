"""The ``endpoint`` backend: any OpenAI-compatible chat server, vLLM first.

Constraints travel in the fields the probed server kind reads (:mod:`agent.llm.server_kinds`):
for vLLM ``response_format`` (json_schema, strict) and the top-level ``structured_outputs``
object (what the OpenAI SDK sends as ``extra_body``); llama.cpp, SGLang, TGI and Ollama get
their own shapes. The removed ``guided_*`` fields are never sent: vLLM >= 0.12 ignores them
silently and answers unconstrained.

What the server is and enforces is probed when the backend opens (:mod:`agent.llm.probe`),
every call is bounded in time and size (:mod:`agent.llm.http`), and the probe decides how a
constraint travels: a schema whose numeric ranges the server would ignore goes as a regex
to a server seen enforcing regexes; a server that enforces no schema stops the run unless
unconstrained use is allowed (then replies are parsed, validated and re-asked).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Literal

from agent.llm.base import LLM, Outcome, Request
from agent.llm.bounds import JSON_WHITESPACE, decoding_regex, unenforced_bounds
from agent.llm.context import TOKENIZE_BUDGET_S, TOKENIZE_MAX_BYTES, ServerCounter, TokenCounter
from agent.llm.http import BoundedClient, HttpLimits, normalize_base_url, one_line, redact_url
from agent.llm.probe import (
    ServerProbe,
    check_enforcement,
    check_native_tools,
    choose_model,
    identify,
    list_models,
)
from agent.llm.sampling import Sampling
from agent.llm.server_kinds import OTHER, ServerKind
from agent.llm.stream import STREAM_FIELDS, StreamedReply
from agent.llm.types import (
    Completion,
    LLMError,
    LLMSetupError,
    OutputValidationError,
    RawReply,
    ThinkingMode,
    ToolCall,
    UnsupportedSettingError,
    Usage,
)

ProbeLevel = Literal["off", "light", "full"]
ROUTING_HEADER = "X-SMG-Routing-Key"

__all__ = ["EndpointLLM", "normalize_base_url", "redact_url"]


class UnenforcedConstraintError(LLMError):
    """The server answers constrained requests unconstrained; refused unless allowed."""


DEFAULT_LIMITS = HttpLimits()
"""How long and how much one call may take unless the caller says (``--call-timeout``, ``--max-reply-mib``)."""


class EndpointLLM(LLM):
    """Chat completions over HTTP: probed once, bounded per call, concurrent in batches."""

    backend = "endpoint"

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        api_key: str | None = None,
        thinking: ThinkingMode = "auto",
        limits: HttpLimits = DEFAULT_LIMITS,
        concurrency: int = 8,
        probe: ProbeLevel = "light",
        allow_unconstrained: bool = False,
        reasks: int = 2,
        routing_key: str | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        if routing_key:
            # sglang-router's manual policy keeps every request with this key on one replica
            # (serve/replicas.py): one story's prefix stays in one replica's cache. Any other
            # server ignores the header.
            headers[ROUTING_HEADER] = routing_key
        self.limits = limits
        self._http = BoundedClient(
            normalize_base_url(base_url), headers=headers, limits=self.limits, concurrency=concurrency
        )
        self.base_url = self._http.shown  # credentials redacted: what every message and record shows
        self.concurrency = max(concurrency, 1)
        self.allow_unconstrained = allow_unconstrained
        self.reasks = max(reasks, 0)
        self.probe: ServerProbe | None = None
        self._native_tools: tuple[bool | None, str | None] | None = None
        try:
            chosen = model
            if probe != "off" or model is None:
                entries = list_models(self._http)
                chosen = choose_model(self._http, entries, model)
                if probe != "off":
                    self.probe = identify(self._http, entries, chosen)
            super().__init__(chosen or "", thinking=thinking)
            if probe == "full" and self.probe is not None:
                check_enforcement(self._http, self.probe, thinking=self._thinking())
                if self.probe.json_schema_enforced is False and not allow_unconstrained:
                    raise UnenforcedConstraintError(
                        f"endpoint {self.base_url} ({self.probe.kind}) does not enforce JSON-schema constraints "
                        "(a probe asking for a fixed value got free text); use a server that does, or pass "
                        "--allow-unconstrained to parse, validate and re-ask"
                    )
        except BaseException:
            self._http.close()
            raise

    def close(self) -> None:
        self._http.close()

    def set_routing_key(self, key: str) -> None:
        """Keep every later request of this client on one replica behind a router (a run's key)."""
        self._http.set_header(ROUTING_HEADER, key)

    @property
    def parameter_count(self) -> int | None:
        """The model's parameters, where the server reports them (llama-server's ``meta.n_params``)."""
        return self.probe.parameters if self.probe else None

    @property
    def context_length(self) -> int | None:
        """The server's context length for this model, when it says (vLLM's ``max_model_len``)."""
        return self.probe.context_length if self.probe else None

    def token_counter(self) -> TokenCounter | None:
        """The server's own count (vLLM's ``POST /tokenize``, at the root beside ``/v1``), through a
        bounded client; ``None`` when the server does not answer a probe count."""
        budget = min(TOKENIZE_BUDGET_S, self.limits.call_budget_s)
        kwargs = self.server.thinking_field(self._thinking()).get("chat_template_kwargs")
        counter = ServerCounter(
            self._http.at_root(HttpLimits(call_budget_s=budget, max_retries=0, max_response_bytes=TOKENIZE_MAX_BYTES)),
            self.model,
            template_kwargs=kwargs,
        )
        try:
            counter.count([{"role": "user", "content": "probe"}])
            return counter
        except Exception:
            counter.close()
            return None

    def native_tools(self) -> bool | None:
        """Whether the server takes native tools (``tools`` with ``tool_choice: "auto"``; ``None``: it
        could not tell): asked once, on first use (:func:`agent.llm.probe.check_native_tools`), and kept
        in ``probe``, so only a run that speaks the native tool protocol pays the request."""
        if self._native_tools is None:
            self._native_tools = check_native_tools(
                self._http, self.server, self.model, context_tokens=self.context_length
            )
            if self.probe is not None:
                self.probe.native_tools = self._native_tools[0]
        return self._native_tools[0]

    def require_native_tools(self) -> None:
        """Raise :class:`LLMSetupError` in one line naming the fix when the server refuses native tools
        (an undecided probe lets the run go on: its first tool turn then says what the server says)."""
        if self.native_tools() is not False:
            return
        why = self._native_tools[1] if self._native_tools else None
        raise LLMSetupError(
            f"this run speaks the native tool protocol (tool_protocol native, the paper profile's), but endpoint "
            f"{self.base_url} ({self.kind}) refuses native tool calls{f' ({why})' if why else ''}; "
            f"{self.server.tools_setup} (fabula serve does), or use --profile default"
        )

    # -- LLM -------------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        """The server kind the probe found (``other`` when not probed): it picks the request shape."""
        return self.probe.kind if self.probe else OTHER.name

    @property
    def server(self) -> ServerKind:
        """The server's kind (:data:`~agent.llm.server_kinds.OTHER` when not probed): it shapes every request."""
        return self.probe.server if self.probe else OTHER

    def _complete(self, request: Request) -> RawReply:
        server = self.server
        wire = server.to_wire(self.payload(request), context_tokens=self.context_length)
        url = server.chat_url(self._http.base_url)
        if request.constraint is None or not server.streams_structured:
            return self._read_reply(server.from_wire(self._http.request_json("POST", url, body=wire)))
        # A structured reply is streamed and watched, so one that runs away is cut there
        # (agent.llm.stream); a server that answers in one piece anyway is read as one.
        reader = StreamedReply()
        data = self._http.request_stream("POST", url, body={**wire, **STREAM_FIELDS}, watch=reader)
        if data is not None:
            return self._read_reply(server.from_wire(data))
        if reader.error is not None:
            raise LLMError(
                self._http.scrub(
                    f"endpoint {self.base_url} sent an error in its streamed reply to "
                    f"POST /chat/completions: {one_line(reader.error, 300)}"
                )
            )
        return replace(self._read_reply(reader.reply()), runaway=reader.runaway)

    def _read_reply(self, data: Any) -> RawReply:
        def bad(what: str) -> LLMError:
            return LLMError(
                self._http.scrub(
                    f"endpoint {self.base_url} answered POST /chat/completions with {what}: {one_line(str(data), 160)}"
                )
            )

        if not isinstance(data, dict):
            raise bad("a JSON value that is not an object")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise bad("no choice")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise bad("a choice without a message object")
        content = message.get("content")  # null beside tool calls
        if content is not None and not isinstance(content, str):
            raise bad(f"non-string content ({type(content).__name__})")
        entries = found if isinstance(found := message.get("tool_calls"), list) else []
        calls = tuple(c for i, e in enumerate(entries) if (c := ToolCall.from_wire(e, f"call_{i}")) is not None)
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        usage = found if isinstance(found := data.get("usage"), dict) else {}
        details = found if isinstance(found := usage.get("prompt_tokens_details"), dict) else {}
        finish = choice.get("finish_reason")
        model = data.get("model")
        return RawReply(
            text=content or "",
            finish_reason=finish if isinstance(finish, str) and finish else "unknown",
            usage=Usage(
                prompt_tokens=_count(usage.get("prompt_tokens")),
                cached_prompt_tokens=_count(details.get("cached_tokens")),
                completion_tokens=_count(usage.get("completion_tokens")),
            ),
            model=model if isinstance(model, str) and model else self.model,
            reasoning=reasoning if isinstance(reasoning, str) else None,
            tool_calls=calls,
        )

    def _run(self, request: Request, sent: Outcome | None = None) -> Completion:
        """Re-ask a reply that fails validation, but only on a server known not to enforce schemas
        (``sent``: never given here; a server's requests are each sent alone)."""
        unconstrained = self.probe is not None and self.probe.json_schema_enforced is False
        if not unconstrained or request.constraint is None:
            return super()._run(request, sent)
        asked = request
        for attempt in range(self.reasks + 1):
            try:
                return super()._run(asked)
            except OutputValidationError as exc:
                if attempt == self.reasks:
                    raise
                schema = json.dumps(
                    request.constraint.json_schema
                    or request.constraint.pattern
                    or list(request.constraint.options or ())
                )
                asked = replace(
                    request,
                    messages=[
                        *request.messages,
                        {
                            "role": "user",
                            "content": (
                                f"Your reply was invalid ({exc}). Reply again with only the answer, exactly in this "
                                f"format: {schema}"
                            ),
                        },
                    ],
                )
        raise AssertionError("unreachable")

    def _run_many(self, requests: list[Request]) -> list[Completion | LLMError]:
        """Send independent requests at once so the server's scheduler batches them."""

        def one(request: Request) -> Completion | LLMError:
            try:
                return self._run(request)
            except LLMError as exc:
                return exc

        if len(requests) <= 1:
            return [one(r) for r in requests]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(requests))) as pool:
            return list(pool.map(one, requests))

    def applied_sampling(self, sampling: Sampling) -> Sampling:
        """All but the string caps, which only the in-process engines apply (``agent.llm.string_cap``:
        as ``maxLength`` a server may compile them by counted repetition, which vLLM's Outlines backend gave
        up on after 30 s), and the prose close (``close_after_words``: a server has no such stop); the
        ledger records the request without them."""
        local_only = {"max_string_chars": None, "max_string_chars_by_key": None, "close_after_words": None}
        if all(getattr(sampling, name) is None for name in local_only):
            return sampling
        return sampling.model_copy(update=local_only)

    def _thinking(self) -> bool | None:
        return None if self.thinking == "auto" else self.thinking == "on"

    def _regex_for(self, schema: dict[str, Any]) -> str | None:
        """A regex for ``schema`` when the server would ignore some of its numeric ranges (not
        seen enforcing them) and enforces regexes (seen, or vLLM before a full probe); ``None``
        keeps the schema (with its enum rewrites)."""
        if unenforced_bounds(schema) == 0 or (self.probe is not None and self.probe.ranges_enforced):
            return None
        regex_ok = (
            self.probe is not None
            and self.server.regex_supported()
            and (self.probe.regex_enforced or (self.probe.regex_enforced is None and self.server.regex_assumed))
        )
        if not regex_ok:
            return None
        try:
            from outlines_core.json_schema import build_regex_from_schema
        except ImportError:
            return None
        return decoding_regex(schema, build_regex_from_schema, JSON_WHITESPACE)

    def payload(self, request: Request) -> dict[str, Any]:
        """The JSON body for one request (public so tests can check the wire format)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
        if request.min_tokens:
            body["min_tokens"] = request.min_tokens
        if request.stop:
            body["stop"] = request.stop
        if request.seed is not None:
            body["seed"] = request.seed
        body.update(sampling_fields(request.sampling))
        server = self.server
        body.update(server.thinking_field(self._thinking()))
        constraint = request.constraint
        if request.tools:  # the server parses the calls: no constraint travels beside them
            body["tools"] = request.tools
            body["tool_choice"] = request.tool_choice or "auto"
        elif constraint is not None:
            if constraint.kind == "json":
                regex = self._regex_for(constraint.json_schema or {})
                if regex:
                    body.update(server.regex_field(regex))
                else:
                    schema = constraint.decoding_schema
                    assert schema is not None, "a json constraint carries its schema (to_constraint sets it)"
                    body.update(server.json_field(constraint.name, schema))
            elif constraint.kind == "regex":
                body.update(server.regex_field(constraint.pattern or ""))
            else:
                body.update(server.choice_field(constraint.options or ()))
        return body


MAX_TOKEN_COUNT = 2**31 - 1
"""The most tokens one reply may report; a larger count (10**30) is no count at all, and
would not fit the ledger's 64-bit integers."""


def _count(value: Any) -> int:
    """A token count from a reply; anything that is not an integer in 0..MAX_TOKEN_COUNT counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKEN_COUNT else 0


def sampling_fields(sampling: Sampling) -> dict[str, Any]:
    """The request fields for ``sampling``: the OpenAI ones (top_p, frequency and presence
    penalties) and vLLM's extra sampling parameters (repetition_penalty, top_k, min_p), which
    vLLM and SGLang read from the top level of the body. ``no_repeat_ngram_size`` has no server
    equivalent and is refused rather than silently dropped."""
    given = sampling.given()
    if "no_repeat_ngram_size" in given:
        raise UnsupportedSettingError(
            "the endpoint backend cannot honour no_repeat_ngram_size (a transformers-only "
            "control); use repetition_penalty or frequency_penalty instead"
        )
    return given
