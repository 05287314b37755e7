"""Fake servers that answer like each kind the probe tells apart, on their own routes only.

Each kind serves exactly the GET routes the real server has (``/v1/models`` with its own
``owned_by``, vLLM's ``/version``, TGI's ``/info``, Ollama's ``/api/version``, llama-server's
``meta``) and answers chat on its own route (Ollama: ``/api/chat`` in its native shape), so a
probe that guesses from the wrong route, or a request sent in the wrong shape, shows up.
Why: the probe and the request shapes are tested against each kind without its server.
"""

from __future__ import annotations

import json
from typing import Any

from agent.testing.replies import chat_reply, model_list
from agent.testing.server import NO_ROUTE, Answer, Call, FakeServer, Stream

MODEL = "tiny"


def _models(owner: str, **extra: Any) -> dict[str, Any]:
    return model_list({"id": MODEL, "object": "model", "owned_by": owner, **extra})


GETS: dict[str, dict[str, Any]] = {
    "vllm": {"/v1/models": _models("vllm", max_model_len=4096), "/version": {"version": "0.32.0"}},
    "sglang": {"/v1/models": _models("sglang", max_model_len=8192)},
    "llama.cpp": {"/v1/models": _models("llamacpp", meta={"n_ctx": 4096, "n_ctx_train": 8192})},
    "llama-cpp-python": {"/v1/models": _models("me", permissions=[])},
    "tgi": {
        "/v1/models": _models(MODEL),
        "/info": {"router": "text-generation-router", "version": "3.3.6", "model_id": MODEL, "max_total_tokens": 2048},
    },
    "ollama": {"/v1/models": _models("library"), "/api/version": {"version": "0.12.3"}},
}


VLLM_NO_AUTO_TOOLS = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
"""What vLLM answers (HTTP 400) to ``tool_choice: "auto"`` when started without a tool-call parser."""


class KindServer(FakeServer):
    """Answers like a server of ``kind`` (on ``root``; it has no ``/v1`` of its own): JSON asked in
    that kind's shape gets the probe's fixed value, a regex or choice in that kind's shape gets a
    matching answer, anything else free text. A request offering ``tools`` gets a call of the first
    one with ``tool_arguments`` in the kind's shape (Ollama: arguments as an object), unless
    ``auto_tools`` is off: then vLLM refuses it as a vLLM started without a tool-call parser does."""

    def __init__(self, kind: str, *, auto_tools: bool = True) -> None:
        self.kind = kind
        self.auto_tools = auto_tools
        self.tool_arguments: dict[str, Any] = {"chapter": 1}
        super().__init__({"GET *": self.get, "POST *": self.post})

    def chats(self) -> list[Any]:
        """The bodies of every chat request, in order."""
        return [c.body for c in self.posted() if c.path in ("/v1/chat/completions", "/api/chat")]

    def get(self, call: Call) -> Answer:
        found = GETS[self.kind].get(call.path)
        return NO_ROUTE if found is None else Answer(200, found)

    def post(self, call: Call) -> Answer | Stream:
        """Answer one POST (a subclass may answer some in another way: a stream)."""
        return Answer(*self.answer(call.path, call.body))

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        kind = self.kind
        if kind == "ollama":
            if path == "/api/show":
                return 200, {"model_info": {"general.architecture": "llama", "llama.context_length": 131072}}
            if path != "/api/chat":
                return 404, {"error": "404 page not found"}
            if body.get("tools"):
                name = body["tools"][0]["function"]["name"]
                call = {"function": {"index": 0, "name": name, "arguments": self.tool_arguments}}
                message = {"role": "assistant", "content": "", "tool_calls": [call]}
                return 200, {"model": MODEL, "message": message, "done": True, "done_reason": "stop"}
            text = self._text(body.get("format") is not None, False)
            return 200, {
                "model": MODEL,
                "message": {"role": "assistant", "content": text, "thinking": "hmm"},
                "done": True,
                "done_reason": "stop",
                "prompt_eval_count": 11,
                "eval_count": 3,
            }
        if path != "/v1/chat/completions":
            return 404, {"error": "no route"}
        if kind == "vllm" and body.get("min_tokens", 0) > body["max_tokens"]:
            return 400, {"error": {"message": "min_tokens must be less than or equal to max_tokens"}}
        if body.get("tools"):
            return self._tool_reply(body)
        response_format = body.get("response_format") or {}
        shape = {
            "vllm": "json_schema",
            "sglang": "json_schema",
            "llama.cpp": "json_object",
            "llama-cpp-python": "json_object",
            "tgi": "json",
        }[kind]
        if kind == "llama-cpp-python" and response_format.get("type") == "json_schema":
            return 422, {"detail": "Input should be 'text' or 'json_object'"}
        regex = {
            "vllm": "structured_outputs" in body,
            "sglang": "regex" in body,
            "tgi": response_format.get("type") == "regex",
        }.get(kind, False)
        text = self._text(response_format.get("type") == shape, regex)
        return 200, chat_reply(text, model=MODEL, prompt=11, completion=3, cached=0 if kind == "vllm" else None)

    def _tool_reply(self, body: dict[str, Any]) -> tuple[int, Any]:
        if self.kind == "vllm" and body.get("tool_choice") == "auto" and not self.auto_tools:
            return 400, {"error": {"message": VLLM_NO_AUTO_TOOLS, "type": "BadRequestError", "code": 400}}
        name = body["tools"][0]["function"]["name"]
        arguments = json.dumps(self.tool_arguments)
        call = {"id": "chatcmpl-tool-1", "type": "function", "function": {"name": name, "arguments": arguments}}
        reply = chat_reply(None, "tool_calls", model=MODEL, prompt=11, completion=3)
        reply["choices"][0]["message"]["tool_calls"] = [call]
        return 200, reply

    @staticmethod
    def _text(json_asked: bool, regex_asked: bool) -> str:
        if json_asked:
            return '{"fabula_probe": "qx7"}'
        return "qx74" if regex_asked else "Hello there!"
