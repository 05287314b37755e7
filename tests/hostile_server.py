"""A small hostile OpenAI-compatible server for tests, bound to 127.0.0.1 only.

``behaviour`` decides how ``POST /v1/chat/completions`` is answered; ``models`` is the raw
JSON of ``GET /v1/models``. Every handler gives up when the server closes, so a test that
leaves a never-answering request behind does not hang the run.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.conftest import free_port


def reply(content: Any = "ok", finish: str = "stop") -> dict[str, Any]:
    return {"model": "m", "choices": [{"message": {"role": "assistant", "content": content},
                                       "finish_reason": finish}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


class HostileServer:
    """Behaviours: ``custom`` (``self.custom(request_body) -> (status, reply)``),
    ``raw`` (``self.raw`` bytes as the body, e.g. JSON nested 100,000 deep),
    ``ok``, ``endless`` (a body that never ends), ``trickle`` (one byte at a
    time, forever), ``silent`` (accepts, never answers), ``garbage`` (not JSON), ``shape``
    (``self.body`` as the JSON reply), ``flaky`` (``self.failures`` 500s, then ok),
    ``retry_after`` (503 with Retry-After: ``self.retry_after``, then ok)."""

    def __init__(self, behaviour: str = "ok") -> None:
        self.behaviour = behaviour
        self.models: Any = {"object": "list", "data": [{"id": "m", "owned_by": "hostile"}]}
        self.body: Any = reply()
        self.raw = b""
        self.failures = 2
        self.retry_after = "1"
        self.posts: list[float] = []
        self.sent = 0
        self.bodies: list[Any] = []
        self.custom: Any = None
        self.paths: list[str] = []
        self.closed = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                models = owner.models  # bytes: sent as they are
                self._send(200, models if isinstance(models, bytes) else json.dumps(models).encode())

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                owner.bodies.append(json.loads(raw or b"null"))
                owner.paths.append(self.path)
                owner.posts.append(time.monotonic())
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    owner._answer(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def _answer(self, handler) -> None:
        kind = self.behaviour
        if kind == "custom":
            status, body = self.custom(self.bodies[-1])
            handler._send(status, json.dumps(body).encode())
        elif kind == "raw":
            handler._send(200, self.raw)
        elif kind == "ok":
            handler._send(200, json.dumps(reply()).encode())
        elif kind == "shape":
            handler._send(200, json.dumps(self.body).encode())
        elif kind == "garbage":
            handler._send(200, b'{"choices": [{"message": {"content": "ok"')
        elif kind == "silent":
            self.closed.wait(300)
        elif kind in ("endless", "trickle"):
            handler.send_response(200)
            handler.send_header("Content-Type", "application/json")
            handler.end_headers()
            handler.wfile.write(b'{"choices": [{"message": {"content": "')
            chunk = b"a" if kind == "trickle" else b"a" * 65536
            while not self.closed.is_set():
                handler.wfile.write(chunk)
                handler.wfile.flush()
                self.sent += len(chunk)
                if kind == "trickle":
                    time.sleep(0.05)
        elif kind == "flaky":
            if len(self.posts) <= self.failures:
                handler._send(500, b'{"error": {"message": "overloaded"}}')
            else:
                handler._send(200, json.dumps(reply("recovered")).encode())
        elif kind == "retry_after":
            if len(self.posts) == 1:
                handler._send(503, b'{"error": {"message": "busy"}}', {"Retry-After": self.retry_after})
            else:
                handler._send(200, json.dumps(reply("after the wait")).encode())
        else:
            raise ValueError(kind)

    def close(self) -> None:
        self.closed.set()
        self.httpd.shutdown()
        self.httpd.server_close()
