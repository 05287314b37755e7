"""The scripted author (``tests/nst/author.py``) behind a vLLM-shaped HTTP server on loopback.

It lets CLI tests walk a writer's road through ``--endpoint URL`` — the real endpoint backend,
probe, bounded client and ledger — without a model: each chat request is turned back into the
:class:`Request` the author answers (its role inferred from the request itself: the outline's
schema name, a tool turn's schema, the prose instruction, a planner stage's system prompt).
It answers the probe as a schema-enforcing vLLM does; it has no ``/tokenize`` (prompts are then
counted with the characters estimate, as for the author in process). ``stall_models`` makes ``GET /v1/models``
hang (a server that accepts connections and never answers); ``fail_chats`` answers every chat
with HTTP 500 (a broken server); ``delay_s`` slows every chat (to kill a run mid-chapter).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent.llm.base import Request
from agent.llm.constraints import JsonSchema, to_constraint
from tests.conftest import free_port
from tests.nst.author import Author

MODEL = "scripted-author"


def role_of(body: dict[str, Any]) -> str:
    """The fabula role a chat request was sent for (what the author dispatches on)."""
    messages = body.get("messages") or []
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    last = messages[-1]["content"] if messages else ""
    schema = (body.get("response_format") or {}).get("json_schema") or {}
    name = schema.get("name") or ""
    if name == "nst_outline":
        return "plan_outline"
    if name:
        return "nst_turn"
    if "Now write the complete text of chapter" in last:
        return "nst_prose"
    if system.startswith("You are a novelist planning"):
        stage = "premise" if "premise" in last.lower() else "synopsis"
        return f"plan_{stage}"
    return "nst_digest"


class AuthorServer:
    """A loopback server answering like vLLM with the scripted author behind it."""

    def __init__(self, author: Author | None = None, *, delay_s: float = 0.0, model: str = MODEL) -> None:
        self.author = author or Author()
        self.delay_s = delay_s
        self.model = model
        self.stall_models = False
        self.fail_chats = False
        self.fail_after: int | None = None
        """Answer HTTP 500 once this many story chats were answered (a server that breaks mid-run)."""
        self.chats: list[dict[str, Any]] = []
        self.model_lists = 0
        """``GET /v1/models`` requests answered: one per client opened (each client probes once)."""
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return None

            def _send(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                if self.path.startswith("/v1/models"):
                    owner.model_lists += 1
                    if owner.stall_models:
                        time.sleep(120)  # accepts, never answers (the client's timeout ends it)
                        return
                    entry = {"id": owner.model, "object": "model", "owned_by": "vllm", "max_model_len": 32768}
                    self._send(200, {"object": "list", "data": [entry]})
                elif self.path == "/version":
                    self._send(200, {"version": "0.32.0"})
                else:
                    self._send(404, {"error": "no route"})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"null")
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": "no route"})
                    return
                self._send(*owner.answer(body))

        self.httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> AuthorServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def answer(self, body: dict[str, Any]) -> tuple[int, Any]:
        probe = _probe_reply(body)
        if probe is not None:
            return probe
        if self.fail_chats or (self.fail_after is not None and len(self.chats) >= self.fail_after):
            return 500, {"error": {"message": "the model crashed"}}
        if self.delay_s:
            time.sleep(self.delay_s)
        schema = (body.get("response_format") or {}).get("json_schema") or {}
        output = JsonSchema(schema["schema"], name=schema.get("name") or "reply") if schema else None
        request = Request(body["messages"], output, body.get("temperature", 0.7), body["max_tokens"],
                          role=role_of(body), constraint=to_constraint(output))
        with self._lock:  # the author keeps per-chapter attempt counts
            self.chats.append(body)
            raw = self.author._complete(request)
        usage = {"prompt_tokens": raw.usage.prompt_tokens, "completion_tokens": raw.usage.completion_tokens,
                 "prompt_tokens_details": {"cached_tokens": 0}}
        return 200, {"model": self.model, "choices": [{"message": {"role": "assistant", "content": raw.text},
                                                  "finish_reason": raw.finish_reason}], "usage": usage}


def _probe_reply(body: dict[str, Any]) -> tuple[int, Any] | None:
    """The probe's four requests, answered as a vLLM that enforces schemas, ranges and regexes."""
    schema = (body.get("response_format") or {}).get("json_schema") or {}
    name = schema.get("name")
    if body.get("min_tokens", 0) > body.get("max_tokens", 1 << 30):
        return 400, {"error": {"message": "min_tokens must be less than or equal to max_tokens"}}
    text = None
    if name == "fabula_probe":
        text = '{"fabula_probe": "qx7"}'
    elif name == "fabula_range":
        text = '{"n": 7000001}'
    elif (body.get("structured_outputs") or {}).get("regex") == "qx7[0-9]":
        text = "qx70"
    if text is None:
        return None
    return 200, {"model": MODEL, "choices": [{"message": {"role": "assistant", "content": text},
                                              "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 9, "completion_tokens": 3, "prompt_tokens_details": {"cached_tokens": 0}}}
