"""Fake servers that answer like each kind the probe tells apart, on their own routes only.

Each kind serves exactly the GET routes the real server has (``/v1/models`` with its own
``owned_by``, vLLM's ``/version``, TGI's ``/info``, Ollama's ``/api/version``, llama-server's
``meta``) and answers chat on its own route (Ollama: ``/api/chat`` in its native shape), so a
probe that guesses from the wrong route, or a request sent in the wrong shape, shows up.
Every request is recorded as ``(method, path, body)``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.conftest import free_port

MODEL = "tiny"


def _openai_reply(text: str, cached: bool) -> dict[str, Any]:
    usage: dict[str, Any] = {"prompt_tokens": 11, "completion_tokens": 3}
    if cached:
        usage["prompt_tokens_details"] = {"cached_tokens": 0}
    return {"model": MODEL, "choices": [{"message": {"role": "assistant", "content": text},
                                         "finish_reason": "stop"}], "usage": usage}


def _models(owner: str, **extra: Any) -> dict[str, Any]:
    return {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": owner, **extra}]}


GETS: dict[str, dict[str, Any]] = {
    "vllm": {"/v1/models": _models("vllm", max_model_len=4096), "/version": {"version": "0.32.0"}},
    "sglang": {"/v1/models": _models("sglang", max_model_len=8192)},
    "llama.cpp": {"/v1/models": _models("llamacpp", meta={"n_ctx": 4096, "n_ctx_train": 8192})},
    "llama-cpp-python": {"/v1/models": _models("me", permissions=[])},
    "tgi": {"/v1/models": _models(MODEL), "/info": {"router": "text-generation-router", "version": "3.3.6",
                                                     "model_id": MODEL, "max_total_tokens": 2048}},
    "ollama": {"/v1/models": _models("library"), "/api/version": {"version": "0.12.3"}},
}


class KindServer:
    """Answers like a server of ``kind``: JSON asked in that kind's shape gets the probe's fixed
    value, a regex or choice in that kind's shape gets a matching answer, anything else free text."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.requests: list[tuple[str, str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                owner.requests.append(("GET", self.path, None))
                found = GETS[owner.kind].get(self.path)
                self._send(200 if found is not None else 404, found if found is not None else {"error": "no route"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
                owner.requests.append(("POST", self.path, body))
                owner.respond(self, body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def chats(self) -> list[Any]:
        """The bodies of every chat request, in order."""
        return [body for method, path, body in self.requests
                if method == "POST" and path in ("/v1/chat/completions", "/api/chat")]

    # -- answers ---------------------------------------------------------------------------
    def respond(self, handler: BaseHTTPRequestHandler, body: Any) -> None:
        """Answer one POST on ``handler`` (a subclass may answer some in another way: a stream)."""
        handler._send(*self.answer(handler.path, body))  # type: ignore[attr-defined]

    def answer(self, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        kind = self.kind
        if kind == "ollama":
            if path == "/api/show":
                return 200, {"model_info": {"general.architecture": "llama", "llama.context_length": 131072}}
            if path != "/api/chat":
                return 404, {"error": "404 page not found"}
            text = self._text(body.get("format") is not None, False)
            return 200, {"model": MODEL, "message": {"role": "assistant", "content": text, "thinking": "hmm"},
                         "done": True, "done_reason": "stop", "prompt_eval_count": 11, "eval_count": 3}
        if path != "/v1/chat/completions":
            return 404, {"error": "no route"}
        if kind == "vllm" and body.get("min_tokens", 0) > body["max_tokens"]:
            return 400, {"error": {"message": "min_tokens must be less than or equal to max_tokens"}}
        response_format = body.get("response_format") or {}
        shape = {"vllm": "json_schema", "sglang": "json_schema", "llama.cpp": "json_object",
                 "llama-cpp-python": "json_object", "tgi": "json"}[kind]
        if kind == "llama-cpp-python" and response_format.get("type") == "json_schema":
            return 422, {"detail": "Input should be 'text' or 'json_object'"}
        regex = {"vllm": "structured_outputs" in body, "sglang": "regex" in body,
                 "tgi": response_format.get("type") == "regex"}.get(kind, False)
        return 200, _openai_reply(self._text(response_format.get("type") == shape, regex), kind == "vllm")

    @staticmethod
    def _text(json_asked: bool, regex_asked: bool) -> str:
        if json_asked:
            return '{"fabula_probe": "qx7"}'
        return "qx74" if regex_asked else "Hello there!"
