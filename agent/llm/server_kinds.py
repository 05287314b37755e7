"""Each kind of server fabula tells apart, as one object: how its chat requests are shaped, how the
probe recognises it, and what it is known to honour.

Servers agree on the OpenAI chat body and most answer HTTP 200 to a field they do not read, so the
request shape must follow the server the probe found. Per-server shapes, and why they mirror
Outlines' adapters without importing them: docs/design/server-kinds.md.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

OLLAMA_NUM_CTX_CAP = 8192
"""The context fabula asks Ollama for when the model allows more: Ollama allocates the whole KV
cache for ``num_ctx`` up front, so the model's full 128K would not fit most machines."""

_OLLAMA_OPTIONS = {
    "temperature": "temperature",
    "max_tokens": "num_predict",
    "seed": "seed",
    "stop": "stop",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "repetition_penalty": "repeat_penalty",
    "frequency_penalty": "frequency_penalty",
    "presence_penalty": "presence_penalty",
}


class Asker(Protocol):
    """The probe's quiet requests to the server's root (``None``: no usable answer)."""

    def get(self, path: str) -> Any: ...

    def post(self, path: str, body: dict[str, Any]) -> Any: ...


@dataclass(frozen=True)
class Sighting:
    """What a kind's own route answered: the version it reports, whether the answer proves the
    kind, and the context length it states."""

    version: str | None
    proven: bool = True
    context_length: int | None = None


def positive_int(value: Any) -> bool:
    """Whether ``value`` is an integer above 0 (a count a server reports, not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def stated_context(entry: dict[str, Any]) -> int | None:
    """The context length a ``/v1/models`` entry states outright (vLLM's ``max_model_len``, ...)."""
    return next(
        (
            entry[key]
            for key in ("max_model_len", "context_length", "context_window", "n_ctx")
            if positive_int(entry.get(key))
        ),
        None,
    )


def meta_context(entry: dict[str, Any]) -> int | None:
    """llama-server's context in the entry's ``meta``: the slot's, else the trained one."""
    meta = found if isinstance(found := entry.get("meta"), dict) else {}
    served = meta.get("n_ctx") if positive_int(meta.get("n_ctx")) else meta.get("n_ctx_train")
    return served if positive_int(served) else None


class ServerKind:
    """An OpenAI-compatible server fabula knows nothing more about (``other``): vLLM's fields."""

    name = "other"
    owners: tuple[str, ...] = ()
    """The ``owned_by`` values of ``GET /v1/models`` that name this kind."""
    template_switch = True
    """Whether the thinking switch travels as ``chat_template_kwargs`` (a chat template reads it)."""
    thinking_switch_honoured = False
    """Whether the kind is known to honour the thinking switch (the probe cannot see it)."""
    regex_assumed = False
    """Whether a regex is taken as enforced before a full probe has looked."""
    streams_structured = False
    """Whether a structured request is streamed, so that a reply that runs away is cut as it is
    written (:mod:`agent.llm.stream`)."""
    tools_setup = (
        "start it with its tool-call parser on (vLLM: --enable-auto-tool-choice --tool-call-parser NAME; "
        "llama-server: --jinja)"
    )
    """How a server of this kind is started so that it takes native tools (OpenAI ``tools`` with
    ``tool_choice: "auto"``): the fix a refused native-tools probe names."""

    # -- how the probe recognises it ---------------------------------------------------------
    def lists_itself(self, entry: dict[str, Any]) -> bool:
        """Whether the model's ``/v1/models`` entry names this kind outright."""
        return str(entry.get("owned_by") or "").lower() in self.owners

    def hinted_by(self, entry: dict[str, Any]) -> bool:
        """Whether the entry, naming no kind, has this kind's marks."""
        return False

    def sighted(self, ask: Asker, entry: dict[str, Any], model: str | None) -> Sighting | None:
        """What this kind's own route says, asked while the kind is unknown or this one (``None``: no route)."""
        return None

    # -- how its requests are shaped ---------------------------------------------------------
    def json_field(self, name: str, schema: dict[str, Any]) -> dict[str, Any]:
        """The body field carrying a JSON-schema constraint."""
        return {
            "response_format": {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
        }

    def regex_field(self, pattern: str) -> dict[str, Any]:
        """The body field carrying a regex constraint (empty: none exists)."""
        return {"structured_outputs": {"regex": pattern}}

    def choice_field(self, options: tuple[str, ...]) -> dict[str, Any]:
        """The body field carrying a choice among fixed strings."""
        return {"structured_outputs": {"choice": list(options)}}

    def regex_supported(self) -> bool:
        """Whether the kind has any field for a regex constraint."""
        return bool(self.regex_field("x"))

    def thinking_field(self, enable: bool | None) -> dict[str, Any]:
        """The switch for a model's thinking (``None``: leave the model's default)."""
        if enable is None or not self.template_switch:
            return {}
        return {"chat_template_kwargs": {"enable_thinking": enable}}

    def chat_url(self, base_url: str) -> str:
        """Where chat requests go: ``/chat/completions`` under ``/v1``."""
        return "/chat/completions"

    def to_wire(self, body: dict[str, Any], *, context_tokens: int | None = None) -> dict[str, Any]:
        """``body`` (OpenAI-shaped) as this kind takes it."""
        return body

    def from_wire(self, reply: Any) -> Any:
        """A reply in the OpenAI shape the backend reads."""
        return reply


def _alternation(options: tuple[str, ...]) -> str:
    return "|".join(re.escape(o) for o in options)


class Vllm(ServerKind):
    name = "vllm"
    owners = ("vllm",)
    thinking_switch_honoured = True
    regex_assumed = True
    streams_structured = True  # its stream counts tokens on every piece and it aborts a request whose client left
    tools_setup = "start vLLM with --enable-auto-tool-choice --tool-call-parser NAME (the model's parser: hermes, ...)"

    def sighted(self, ask: Asker, entry: dict[str, Any], model: str | None) -> Sighting | None:
        """``GET /version``; only an entry with vLLM's ``max_model_len`` makes an unnamed server vLLM."""
        version = ask.get("/version")
        if not (isinstance(version, dict) and isinstance(version.get("version"), str)):
            return None
        return Sighting(version["version"][:40], proven="max_model_len" in entry)


class SGLang(ServerKind):
    name = "sglang"
    owners = ("sglang",)
    thinking_switch_honoured = True
    tools_setup = "start SGLang with --tool-call-parser NAME (the model's parser)"

    def regex_field(self, pattern: str) -> dict[str, Any]:
        return {"regex": pattern}

    def choice_field(self, options: tuple[str, ...]) -> dict[str, Any]:
        return self.regex_field(_alternation(options))


class LlamaServer(ServerKind):
    """llama.cpp's ``llama-server``."""

    name = "llama.cpp"
    owners = ("llamacpp", "llama.cpp")
    tools_setup = "start llama-server with --jinja (its chat template then parses tool calls)"

    def hinted_by(self, entry: dict[str, Any]) -> bool:
        """llama-server's ``meta`` context where no other key states one."""
        return stated_context(entry) is None and meta_context(entry) is not None

    def json_field(self, name: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"response_format": {"type": "json_object", "schema": schema}}

    def regex_field(self, pattern: str) -> dict[str, Any]:
        return {}

    def choice_field(self, options: tuple[str, ...]) -> dict[str, Any]:
        return {"grammar": "root ::= " + " | ".join(json.dumps(o) for o in options)}


class LlamaCppPython(LlamaServer):
    """llama-cpp-python's server: llama.cpp's shapes, no chat-template switch."""

    name = "llama-cpp-python"
    template_switch = False
    tools_setup = "start llama-cpp-python's server with a function-calling --chat_format (chatml-function-calling)"

    def lists_itself(self, entry: dict[str, Any]) -> bool:
        """``owned_by: "me"`` with a ``permissions`` list."""
        return str(entry.get("owned_by") or "").lower() == "me" and isinstance(entry.get("permissions"), list)

    def hinted_by(self, entry: dict[str, Any]) -> bool:
        return False


class Tgi(ServerKind):
    name = "tgi"
    template_switch = False

    def sighted(self, ask: Asker, entry: dict[str, Any], model: str | None) -> Sighting | None:
        """``GET /info``: TGI's router, or its model and token limits."""
        info = ask.get("/info")
        if not (
            isinstance(info, dict)
            and (info.get("router") == "text-generation-router" or ("model_id" in info and "max_total_tokens" in info))
        ):
            return None
        context = info["max_total_tokens"] if positive_int(info.get("max_total_tokens")) else None
        return Sighting(str(info.get("version") or "")[:40] or None, context_length=context)

    def json_field(self, name: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"response_format": {"type": "json", "value": schema}}

    def regex_field(self, pattern: str) -> dict[str, Any]:
        return {"response_format": {"type": "regex", "value": pattern}}

    def choice_field(self, options: tuple[str, ...]) -> dict[str, Any]:
        return self.regex_field(_alternation(options))


class Ollama(ServerKind):
    name = "ollama"
    owners = ("library", "ollama")
    thinking_switch_honoured = True
    tools_setup = "serve a model whose Ollama template takes tools (`ollama show MODEL` lists the capability)"

    def sighted(self, ask: Asker, entry: dict[str, Any], model: str | None) -> Sighting | None:
        """``GET /api/version``, and the model's context from ``POST /api/show`` (capped: see the cap)."""
        version = ask.get("/api/version")
        if not (isinstance(version, dict) and isinstance(version.get("version"), str)):
            return None
        shown = ask.post("/api/show", {"model": model})
        info = shown.get("model_info") if isinstance(shown, dict) else None
        trained = (
            [v for k, v in info.items() if k.endswith(".context_length") and positive_int(v)]
            if isinstance(info, dict)
            else []
        )
        context = min(trained[0], OLLAMA_NUM_CTX_CAP) if trained else OLLAMA_NUM_CTX_CAP
        return Sighting(version["version"][:40], context_length=context)

    def regex_field(self, pattern: str) -> dict[str, Any]:
        return {}

    def choice_field(self, options: tuple[str, ...]) -> dict[str, Any]:
        return {}

    def thinking_field(self, enable: bool | None) -> dict[str, Any]:
        return {} if enable is None else {"think": enable}

    def chat_url(self, base_url: str) -> str:
        """Ollama's native ``/api/chat`` at its root."""
        return base_url.removesuffix("/v1") + "/api/chat"

    def to_wire(self, body: dict[str, Any], *, context_tokens: int | None = None) -> dict[str, Any]:
        options = {ollama: body[ours] for ours, ollama in _OLLAMA_OPTIONS.items() if body.get(ours) is not None}
        if context_tokens:
            options["num_ctx"] = context_tokens
        wire: dict[str, Any] = {
            "model": body["model"],
            "messages": _ollama_messages(body["messages"]),
            "stream": False,
            "options": options,
        }
        if body.get("tools"):
            wire["tools"] = body["tools"]  # the OpenAI shape; /api/chat has no tool_choice (it is always auto)
        response_format = body.get("response_format")
        if isinstance(response_format, dict) and response_format.get("type") == "json_schema":
            wire["format"] = response_format["json_schema"]["schema"]
        if "think" in body:
            wire["think"] = body["think"]
        return wire

    def from_wire(self, reply: Any) -> Any:
        if not isinstance(reply, dict) or "choices" in reply:
            return reply
        message = found if isinstance(found := reply.get("message"), dict) else {}
        out_message: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
        if isinstance(message.get("thinking"), str) and message["thinking"]:
            out_message["reasoning_content"] = message["thinking"]
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            out_message["tool_calls"] = [_openai_tool_call(call, i) for i, call in enumerate(calls)]
        finish = "tool_calls" if out_message.get("tool_calls") else reply.get("done_reason") or "unknown"
        return {
            "model": reply.get("model"),
            "choices": [{"message": out_message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": reply.get("prompt_eval_count", 0),
                "completion_tokens": reply.get("eval_count", 0),
            },
        }


def _ollama_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chat as ``/api/chat`` takes it: an assistant's tool calls with their arguments as objects
    (Ollama's shape; JSON text that is no object goes as ``{}``), and a tool result naming its tool
    (``tool_name``: Ollama matches results by name, not id). Messages without tools go unchanged."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for message in messages:
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and isinstance(calls, list) and calls:
            converted = []
            for call in calls:
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(function, dict):
                    continue
                names[str(call.get("id"))] = str(function.get("name"))
                converted.append({"function": {"name": function.get("name"), "arguments": _object(function)}})
            message = {**message, "tool_calls": converted}
        elif message.get("role") == "tool":
            message = {**message, "tool_name": names.get(str(message.get("tool_call_id")), "")}
        out.append(message)
    return out


def _object(function: dict[str, Any]) -> dict[str, Any]:
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {}
    return arguments if isinstance(arguments, dict) else {}


def _openai_tool_call(call: Any, index: int) -> Any:
    """One of Ollama's ``tool_calls`` (arguments an object, an id only in newer versions) in the
    OpenAI shape: arguments as JSON text, ``call_<index>`` where it gave no id. Not a call: as it is."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return call
    arguments = function.get("arguments")
    text = arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False)
    given = call.get("id")
    return {
        "id": given if isinstance(given, str) and given else f"call_{index}",
        "type": "function",
        "function": {"name": function.get("name"), "arguments": text},
    }


OTHER = ServerKind()
SERVER_KINDS: dict[str, ServerKind] = {
    kind.name: kind for kind in (Vllm(), SGLang(), LlamaServer(), LlamaCppPython(), Tgi(), Ollama(), OTHER)
}
"""Every server kind by name, in the order the probe tries their routes (vLLM's ``/version``
before TGI's ``/info`` before Ollama's ``/api/version``)."""


def server_kind(name: str) -> ServerKind:
    """The kind called ``name`` (a probe's record); an unknown name is :data:`OTHER`."""
    return SERVER_KINDS.get(name, OTHER)
