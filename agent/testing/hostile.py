"""A hostile OpenAI-compatible server: replies that are slow, endless, cut, malformed or refused.

Why: fabula must end every call against such a server within its budget, in one line, with no
secret printed (``tests/test_hostile_server.py``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

from agent.testing.replies import chat_reply, model_list
from agent.testing.server import Answer, Call, FakeServer, Hang, Stream


class HostileServer(FakeServer):
    """Every GET is answered with ``models`` (bytes sent as they are); ``behaviour`` decides how every
    POST is: ``custom`` (``custom(request_body) -> (status, reply)``), ``raw`` (``raw`` bytes as the
    body, e.g. JSON nested 100,000 deep), ``ok``, ``endless`` (a body that never ends; ``sent`` counts
    its bytes), ``trickle`` (one byte at a time, forever), ``silent`` (accepts, never answers),
    ``garbage`` (not JSON), ``shape`` (``body`` as the JSON reply), ``flaky`` (``failures`` 500s,
    then ok), ``retry_after`` (503 with Retry-After: ``retry_after``, then ok). Connections are kept
    open (HTTP/1.1); every held request ends when the server closes, so none hangs the test run."""

    def __init__(self, behaviour: str = "ok") -> None:
        self.behaviour = behaviour
        self.models: Any = model_list({"id": "m", "owned_by": "hostile"})
        self.body: Any = chat_reply()
        self.raw = b""
        self.failures = 2
        self.retry_after = "1"
        self.sent = 0
        self.custom: Callable[[Any], tuple[int, Any]] | None = None
        super().__init__({"GET *": self.list_models, "POST *": self.chat}, http11=True)

    def list_models(self, call: Call) -> Answer:
        return Answer(200, self.models if isinstance(self.models, bytes) else json.dumps(self.models).encode())

    def chat(self, call: Call) -> Answer | Stream | Hang:
        kind = self.behaviour
        if kind == "custom" and self.custom is not None:
            status, body = self.custom(call.body)
            return Answer(status, json.dumps(body).encode())
        if kind == "raw":
            return Answer(200, self.raw)
        if kind == "ok":
            return Answer(200, chat_reply())
        if kind == "shape":
            return Answer(200, json.dumps(self.body).encode())
        if kind == "garbage":
            return Answer(200, b'{"choices": [{"message": {"content": "ok"')
        if kind == "silent":
            return Hang(300)
        if kind in ("endless", "trickle"):
            return Stream(self._endless(b"a" if kind == "trickle" else b"a" * 65536, 0.05 if kind == "trickle" else 0))
        if kind == "flaky":
            if len(self.posted()) <= self.failures:
                return Answer(500, b'{"error": {"message": "overloaded"}}')
            return Answer(200, chat_reply("recovered"))
        if kind == "retry_after":
            if len(self.posted()) == 1:
                return Answer(503, b'{"error": {"message": "busy"}}', {"Retry-After": self.retry_after})
            return Answer(200, chat_reply("after the wait"))
        raise ValueError(kind)

    def _endless(self, piece: bytes, pause: float) -> Iterator[bytes]:
        yield b'{"choices": [{"message": {"content": "'
        while True:
            yield piece
            self.sent += len(piece)
            if pause:
                time.sleep(pause)
