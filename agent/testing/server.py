"""The one fake OpenAI-compatible HTTP server: loopback only, a port of its own, a thread per request.

What it answers is pluggable: ``routes`` maps ``"METHOD /path"`` (exact) or ``"METHOD *"`` (any path)
to a function of the :class:`Call` that returns an :class:`Answer`, a :class:`Stream` or a
:class:`Hang`; anything else is a 404. Every request is kept in ``calls`` before it is answered.
Why one: the tests, benchmarks and probes each had their own handler, port and shutdown code.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from agent.testing.replies import model_list


@dataclass(frozen=True)
class Call:
    """One request as the server read it."""

    method: str
    path: str
    """As sent, query included."""
    headers: Message
    raw: bytes
    body: Any
    """``raw`` parsed as JSON (``None`` when it is not JSON)."""
    at: float
    """``time.monotonic()`` when it arrived."""


@dataclass(frozen=True)
class Answer:
    """A whole reply: ``body`` bytes are sent as they are, text as UTF-8, anything else as JSON."""

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)

    def encoded(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        return self.body.encode() if isinstance(self.body, str) else json.dumps(self.body).encode()


@dataclass(frozen=True)
class Stream:
    """A reply written piece by piece, with no length (server-sent events, a body that never ends).
    Writing stops when the client leaves or the server closes; ``pieces`` is then closed."""

    pieces: Iterable[bytes]
    content_type: str = "application/json"
    close: bool = False
    """Send ``Connection: close`` and end the connection with the stream."""


@dataclass(frozen=True)
class Hang:
    """No reply at all: the request is held until the server closes or ``seconds`` pass."""

    seconds: float = 300.0


Route = Callable[[Call], Answer | Stream | Hang]
NO_ROUTE = Answer(404, {"error": "no route"})


class FakeServer:
    """Serves ``routes`` on ``http://127.0.0.1:PORT`` (``root``; ``url`` adds ``/v1``) until closed.

    ``http11`` keeps connections open between requests (HTTP/1.1), as the hostile tests need."""

    def __init__(self, routes: Mapping[str, Route] | None = None, *, http11: bool = False) -> None:
        self.routes: dict[str, Route] = dict(routes or {})
        self.calls: list[Call] = []
        self.closed = threading.Event()
        self.httpd = _HTTPServer(self, _Handler11 if http11 else _Handler)
        self.root = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.url = self.root + "/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def route(self, call: Call) -> Route:
        return self.routes.get(f"{call.method} {call.path}") or self.routes.get(f"{call.method} *") or _no_route

    def posted(self) -> list[Call]:
        """Every POST so far, in order."""
        return [c for c in self.calls if c.method == "POST"]

    @property
    def bodies(self) -> list[Any]:
        """The body of every POST so far, in order."""
        return [c.body for c in self.posted()]

    def close(self) -> None:
        """Ends every held request and stream, then stops serving."""
        self.closed.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def models_server(model: str = "fake-model") -> FakeServer:
    """A server that lists ``model`` (context 4096) at ``GET /v1/models`` and answers nothing else:
    enough for a client to open, for tests of which model and endpoint a command chooses."""
    listing = Answer(200, model_list({"id": model, "object": "model", "max_model_len": 4096}))
    return FakeServer({"GET /v1/models": lambda call: listing})


def _no_route(call: Call) -> Answer:
    return NO_ROUTE


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return None


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: FakeServer, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.owner = owner


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        owner = self.server.owner
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        call = Call(method, self.path, self.headers, raw, _json(raw), time.monotonic())
        owner.calls.append(call)
        reply = owner.route(call)(call)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            if isinstance(reply, Answer):
                self._answer(reply)
            elif isinstance(reply, Stream):
                self._stream(reply, owner.closed)
            else:
                owner.closed.wait(reply.seconds)

    def _answer(self, answer: Answer) -> None:
        data = answer.encoded()
        self.send_response(answer.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in answer.headers.items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, stream: Stream, closed: threading.Event) -> None:
        self.send_response(200)
        self.send_header("Content-Type", stream.content_type)
        if stream.close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        pieces = iter(stream.pieces)
        try:
            while not closed.is_set():
                piece = next(pieces, None)
                if piece is None:
                    break
                self.wfile.write(piece)
                self.wfile.flush()
        finally:
            close = getattr(pieces, "close", None)
            if close is not None:
                close()


class _Handler11(_Handler):
    protocol_version = "HTTP/1.1"
