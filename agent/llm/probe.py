"""Ask an OpenAI-compatible server what it is and what it enforces, instead of assuming.

Servers differ in what they honour while answering HTTP 200 to all of it: llama.cpp's
server and Ollama accept ``response_format`` but differ on ``min_tokens``, the thinking
switch and cached-token reports; older or misconfigured servers ignore a JSON-schema
constraint entirely. The probe runs once when the endpoint backend opens and its findings
are recorded in the run, so a degraded run says why. Each check is a tiny request whose
answer differs depending on whether the server honours the setting.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.llm.http import BoundedClient, one_line
from agent.llm.server_kinds import (
    OTHER,
    SERVER_KINDS,
    ServerKind,
    meta_context,
    positive_int,
    server_kind,
    stated_context,
)
from agent.llm.types import AuthenticationError, EndpointUnavailableError, LLMError

# A value an unconstrained model would not write when asked to say hello.
PROBE_SCHEMA = {
    "type": "object",
    "properties": {"fabula_probe": {"type": "string", "enum": ["qx7"]}},
    "required": ["fabula_probe"],
    "additionalProperties": False,
}
PROBE_ASK = [{"role": "user", "content": "Say hello in one short sentence."}]
RANGE_MIN = 7000001
RANGE_SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer", "minimum": RANGE_MIN}},
    "required": ["n"],
    "additionalProperties": False,
}
RANGE_ASK = [{"role": "user", "content": 'Answer with the JSON object {"n": 1}.'}]
TOOL_PROBE = {
    "type": "function",
    "function": {
        "name": "fabula_probe",
        "description": "Say hello.",
        "parameters": {"type": "object", "properties": {}, "additionalProperties": False},
    },
}
"""The one trivial tool the native-tools probe offers (nothing of it is ever run)."""
TOOL_REFUSALS = (400, 422)
"""The statuses of a server refusing a request it cannot serve as asked (vLLM: 400, "auto" tool choice
needs --enable-auto-tool-choice and --tool-call-parser; llama-server without --jinja: 400 too)."""


@dataclass
class ServerProbe:
    """What the server said about itself and what it was seen to enforce (``None``: not checked)."""

    endpoint: str
    kind: str = OTHER.name
    """The name of the server's kind (:data:`agent.llm.server_kinds.SERVER_KINDS`)."""
    version: str | None = None
    models: list[str] = field(default_factory=list)
    model: str | None = None
    context_length: int | None = None
    parameters: int | None = None
    """The model's parameter count, where the server reports it (llama-server's ``meta.n_params``)."""
    json_schema_enforced: bool | None = None
    regex_enforced: bool | None = None
    ranges_enforced: bool | None = None
    min_tokens: bool | None = None
    cached_tokens_reported: bool | None = None
    thinking_switch: bool | None = None
    native_tools: bool | None = None
    """Whether the server takes native tools with ``tool_choice: "auto"`` (:func:`check_native_tools`):
    asked only for a run that speaks the native tool protocol, so ``None`` elsewhere."""
    degraded: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def server(self) -> ServerKind:
        """The server's kind, which shapes every request to it."""
        return server_kind(self.kind)

    def summary(self) -> str:
        """One line for ``-v`` output and logs."""
        flags = {
            "json": self.json_schema_enforced,
            "ranges": self.ranges_enforced,
            "regex": self.regex_enforced,
            "min_tokens": self.min_tokens,
            "cached": self.cached_tokens_reported,
            "thinking": self.thinking_switch,
            "tools": self.native_tools,
        }
        shown = " ".join(f"{k}={'?' if v is None else 'yes' if v else 'no'}" for k, v in flags.items())
        return (
            f"server {self.kind}{' ' + self.version if self.version else ''} at {self.endpoint}: "
            f"model={self.model} context={self.context_length or '?'} {shown}"
        )


def list_models(client: BoundedClient) -> list[dict[str, Any]]:
    """``GET /v1/models`` checked for shape: a list of entries that each have a string ``id``."""
    data = client.request_json("GET", "/models")
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("id"), str) for e in entries):
        raise LLMError(
            client.scrub(
                f"endpoint {client.shown} answered GET /models with an unexpected shape "
                f'(want {{"data": [{{"id": ...}}]}}): {one_line(json.dumps(data)[:200])}'
            )
        )
    return entries


def choose_model(client: BoundedClient, entries: list[dict[str, Any]], wanted: str | None) -> str:
    """The model to use: ``wanted`` if served, else the only one served; several: an error listing them."""
    names = [e["id"] for e in entries]
    if wanted:
        if names and wanted not in names:
            raise LLMError(
                f"endpoint {client.shown} does not serve model {wanted!r}; it serves: {', '.join(names[:20])}"
            )
        return wanted
    if not names:
        raise LLMError(f"endpoint {client.shown} serves no model")
    if len(names) > 1:
        raise LLMError(
            f"endpoint {client.shown} serves {len(names)} models; choose one with --model "
            f"(or FABULA_MODEL): {', '.join(names[:20])}"
        )
    return names[0]


def identify(client: BoundedClient, entries: list[dict[str, Any]], model: str) -> ServerProbe:
    """The cheap part (GETs only): kind, version, served models and context length.

    ``/v1/models`` names vLLM, SGLang and llama-server by ``owned_by``; llama-cpp-python's server
    answers ``owned_by: "me"`` with a ``permissions`` list; TGI and Ollama are told apart by
    their own routes (``/info``, ``/api/version``), which the others do not serve.
    """
    probe = ServerProbe(endpoint=client.shown, models=[e["id"] for e in entries], model=model)
    entry = next((e for e in entries if e["id"] == model), {})
    if str(entry.get("owned_by") or "").lower() == "local":  # sglang-router's own entry: a worker says what it is
        entry = _behind_router(client, model) or entry
    kinds = SERVER_KINDS.values()
    named = next((k for k in kinds if k.lists_itself(entry)), None)
    probe.kind = (named or next((k for k in kinds if k.hinted_by(entry)), OTHER)).name
    probe.context_length = stated_context(entry) or meta_context(entry)
    meta = found if isinstance(found := entry.get("meta"), dict) else {}
    if positive_int(meta.get("n_params")):
        probe.parameters = meta["n_params"]
    ask = _QuietAsker(client)
    for kind in kinds:
        if probe.kind in (OTHER.name, kind.name) and (seen := kind.sighted(ask, entry, probe.model)) is not None:
            probe.version = seen.version
            probe.kind = kind.name if seen.proven else probe.kind
            probe.context_length = seen.context_length or probe.context_length
    return probe


class _QuietAsker:
    """The probe's requests to the server's root for a kind's own routes: short, never retried,
    and ``None`` for any failure (a route a server lacks is an answer too)."""

    def __init__(self, client: BoundedClient) -> None:
        self.client, self.root = client, client.base_url.removesuffix("/v1")

    def get(self, path: str) -> Any:
        return _get_quietly(self.client, self.root + path)

    def post(self, path: str, body: dict[str, Any]) -> Any:
        try:
            return self.client.request_json("POST", self.root + path, body=body, budget_s=10, retry=False)
        except LLMError:
            return None


def check_enforcement(client: BoundedClient, probe: ServerProbe, *, thinking: bool | None) -> None:
    """The costly part: four tiny requests that show what the server enforces."""
    server = probe.server
    base = {
        "model": probe.model,
        "messages": PROBE_ASK,
        "temperature": 0,
        "max_tokens": 32,
        **server.thinking_field(thinking),
    }
    reply = _post_quietly(client, probe, {**base, **server.json_field("fabula_probe", PROBE_SCHEMA)})
    if reply is not None:
        probe.json_schema_enforced = _answered(reply, {"fabula_probe": "qx7"})
        if probe.json_schema_enforced is None:
            probe.degraded.append("JSON-schema probe inconclusive (a JSON reply cut at its length limit)")
        usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
        probe.cached_tokens_reported = isinstance(usage.get("prompt_tokens_details"), dict)
        if thinking is not None:
            probe.thinking_switch = server.thinking_switch_honoured or None
    if probe.json_schema_enforced:
        # Outlines ignores minimum/maximum, xgrammar enforces them: ask for a number below the bound.
        ranged = _post_quietly(
            client, probe, {**base, "messages": RANGE_ASK, **server.json_field("fabula_range", RANGE_SCHEMA)}
        )
        probe.ranges_enforced = _answered(ranged, lambda v: isinstance(v.get("n"), int) and v["n"] >= RANGE_MIN)
    regex_field = server.regex_field("qx7[0-9]")
    regex = _post_quietly(client, probe, {**base, **regex_field}) if regex_field else None
    probe.regex_enforced = regex is not None and _content(regex).strip()[:4] in {f"qx7{d}" for d in range(10)}
    # A server that reads min_tokens refuses min_tokens > max_tokens; one that ignores it answers.
    refused = _post_quietly(client, probe, {**base, "max_tokens": 1, "min_tokens": 2}, want_status=True)
    probe.min_tokens = refused == 400
    if probe.json_schema_enforced is False:
        probe.degraded.append("JSON-schema constraints not enforced: replies are parsed, validated and re-asked")
    if not probe.regex_enforced and not probe.ranges_enforced:
        probe.degraded.append(
            "neither numeric ranges nor regexes enforced: only small integer ranges "
            "(as enums) hold while decoding; the rest are validated after"
        )
    if not probe.min_tokens:
        probe.degraded.append("min_tokens ignored: length is kept by feedback only")
    if probe.cached_tokens_reported is False:
        probe.degraded.append("cached prompt tokens not reported: cache hits are counted as 0")


def check_native_tools(
    client: BoundedClient, server: ServerKind, model: str, *, context_tokens: int | None = None
) -> tuple[bool | None, str | None]:
    """Whether the server takes native tools: one request offering :data:`TOOL_PROBE` with
    ``tool_choice: "auto"`` and ``max_tokens`` 1, and the server's refusal in one line when it
    refuses (``(False, why)``). A 2xx is ``(True, None)``; any other failure ``(None, None)`` (it
    could not tell). Why a request and not a flag: no server reports how it was started."""
    body = {
        "model": model,
        "messages": PROBE_ASK,
        "temperature": 0,
        "max_tokens": 1,
        "tools": [TOOL_PROBE],
        "tool_choice": "auto",
    }
    wire = server.to_wire(body, context_tokens=context_tokens)
    try:
        client.request_json("POST", server.chat_url(client.base_url), body=wire, budget_s=120, retry=False)
    except (EndpointUnavailableError, AuthenticationError):  # no finding: every later request fails alike
        raise
    except LLMError as exc:
        text = str(exc)
        refused = next((f"HTTP {status}" for status in TOOL_REFUSALS if f"HTTP {status}" in text), None)
        return (False, one_line(text[text.index(refused) :], 240)) if refused else (None, None)
    return True, None


def _answered(reply: Any, expected: Any) -> bool | None:
    """Whether a probe reply is the constrained answer (``expected``: the value, or a test of it).

    ``None`` when it cannot tell: no reply, or JSON cut at the length limit (a small model can
    spend its tokens on whitespace inside a valid object); free text means not enforced.
    """
    if reply is None:
        return None
    text = _content(reply).strip()
    try:
        value = json.loads(text)
    except RecursionError:
        return False
    except ValueError:
        try:
            cut = reply["choices"][0]["finish_reason"] == "length"
        except (KeyError, IndexError, TypeError):
            cut = False
        return None if cut and text.startswith("{") else False
    if not isinstance(value, dict):
        return False
    return bool(expected(value)) if callable(expected) else value == expected


def _content(reply: Any) -> str:
    try:
        content = reply["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return ""
    return content if isinstance(content, str) else ""


def _behind_router(client: BoundedClient, model: str) -> dict[str, Any] | None:
    """The model's ``/v1/models`` entry from a worker behind sglang-router (``GET /workers``
    lists them); ``None`` when the router's workers cannot be reached from here."""
    listing = _get_quietly(client, client.base_url.removesuffix("/v1") + "/workers")
    workers = listing.get("workers") if isinstance(listing, dict) else None
    for worker in workers if isinstance(workers, list) else []:
        url = worker.get("url") if isinstance(worker, dict) else None
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            continue
        models = _get_quietly(client, url.rstrip("/") + "/v1/models")
        data = models.get("data") if isinstance(models, dict) else None
        for entry in data if isinstance(data, list) else []:
            if isinstance(entry, dict) and entry.get("id") == model:
                return entry
    return None


def _get_quietly(client: BoundedClient, path: str) -> Any:
    try:
        return client.request_json("GET", path, budget_s=10, retry=False)
    except LLMError:
        return None


def _post_quietly(client: BoundedClient, probe: ServerProbe, body: dict[str, Any], want_status: bool = False) -> Any:
    """A probe request; a refusal is a finding, but a server that does not answer is an error."""
    server = probe.server
    wire = server.to_wire(body, context_tokens=probe.context_length)
    try:
        reply = server.from_wire(
            client.request_json("POST", server.chat_url(client.base_url), body=wire, budget_s=120, retry=False)
        )
    except (EndpointUnavailableError, AuthenticationError):  # no finding: every later request fails alike
        raise
    except LLMError as exc:
        if want_status:
            return 400 if "HTTP 400" in str(exc) or "HTTP 422" in str(exc) else None
        return None
    return 200 if want_status else reply if isinstance(reply, dict) else None
