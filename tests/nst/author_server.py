"""The scripted author behind a tiny OpenAI-compatible HTTP server, for real ``fabula`` subprocesses.

The role of each request is inferred from what a real server sees: the response schema (an
outline or a tool call) or, for plain text, the last user message. ``vllm=True`` answers
``GET /v1/models`` (and ``/version``) as vLLM does, so the endpoint backend probes it as vLLM
(context from ``max_model_len``); it has no ``/tokenize`` (prompts are then counted with the
characters estimate, as for the author in process). For the writer's-road tests:
``stall_models`` makes ``GET /v1/models`` hang (a server that accepts and never answers);
``fail_chats`` answers every story call with HTTP 500, ``fail_after`` does once that many were
answered (a server that breaks mid-run); ``model_lists`` counts the model lists asked for (one
per client opened).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from agent.llm.base import Request
from agent.llm.constraints import JsonSchema, to_constraint
from tests.nst.author import Author
from tests.probe_replies import probe_reply


def infer_role(body: dict) -> str:
    schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
    if schema is not None:
        properties = schema.get("properties", {})
        if "contradictions" in properties:
            return "reconcile_judge"
        if "draft" in properties and "reason" in properties:
            return "drafts_judge"
        return "plan_outline" if "chapters" in properties else "nst_turn"
    last = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    if last.rsplit("\n\n", 1)[-1].startswith("Now write the complete text of chapter"):  # alone or closing a turn
        return "nst_prose"
    if last.startswith("Rewrite this passage of a novel"):
        return "lint_fix"
    if "Rewrite the summary" in last:
        return "rollsum_summary"
    if "Write the complete story" in last:
        return "direct_story"
    if "# Current task" in last or last.startswith("REJECTED"):
        return "rollsum_chapter"
    return "plan_stage"


class AuthorServer:
    def __init__(self, author: Author | None = None, delay_s: float = 0.0, *, model: str = "scripted-author",
                 vllm: bool = False) -> None:
        self.author = author or Author()
        self.delay_s = delay_s
        self.model, self.vllm = model, vllm
        self.stall_models = False
        self.fail_chats = False
        self.fail_after: int | None = None
        self.model_lists = 0
        self.count = 0
        self.prompt_tokens: int = 100
        self.gate = threading.Event()
        """Open (set) by default; a test clears it to hold every author request at the door (the
        probe is still answered), then knows exactly where each writer is: waiting on a call."""
        self.gate.set()
        self.waiting = 0
        self._waiting_lock = threading.Lock()
        """What every reply reports as its prompt tokens (a hostile test sets 10**30)."""
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, body: dict, status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path.startswith("/v1/models"):
                    outer.model_lists += 1
                    if outer.stall_models:
                        time.sleep(120)  # accepts, never answers (the client's timeout ends it)
                        return
                    entry = {"id": outer.model, "object": "model", "owned_by": "vllm", "max_model_len": 32768} \
                        if outer.vllm else {"id": outer.model}
                    self._send({"object": "list", "data": [entry]})
                elif outer.vllm and self.path == "/version":
                    self._send({"version": "0.32.0"})
                else:
                    self._send({"error": "no route"}, 404)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path != "/v1/chat/completions" or "max_tokens" not in body:
                    # not fabula's chat request: a stray client of an earlier test whose server held this
                    # port is answered 404 and never counted (it once made fail_after fire a call early)
                    self._send({"error": "no route"}, 404)
                    return
                probe = probe_reply(body)  # the endpoint backend's capability probe: not the author's turn
                if probe is not None:
                    self._send(probe[1], probe[0])
                    return
                if not outer.gate.is_set():
                    with outer._waiting_lock:
                        outer.waiting += 1
                    outer.gate.wait()
                    with outer._waiting_lock:
                        outer.waiting -= 1
                if outer.fail_chats or (outer.fail_after is not None and outer.count >= outer.fail_after):
                    self._send({"error": {"message": "the model crashed"}}, 500)
                    return
                time.sleep(outer.delay_s)
                outer.count += 1
                schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
                request = Request(body["messages"], JsonSchema(schema) if schema else None,
                                  max_tokens=body["max_tokens"], role=infer_role(body))
                request.constraint = to_constraint(request.output_type)
                text, finish = outer.author.reply(request)
                self._send({"model": outer.model, "choices": [{"message": {"content": text},
                                                                     "finish_reason": finish}],
                            "usage": {"prompt_tokens": outer.prompt_tokens, "completion_tokens": len(text) // 4,
                                      "prompt_tokens_details": {"cached_tokens": 60}}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.gate.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> AuthorServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
