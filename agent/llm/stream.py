"""A streamed chat reply, read as it arrives, so a structured reply that runs away is cut there.

A grammar keeps a JSON string field open as long as the model likes. The embedded engines stop a
runaway between two tokens (:mod:`agent.llm.local_decoding`); over HTTP the endpoint backend asks
vLLM for a structured reply as a stream of server-sent events and runs the same check
(:func:`agent.repetition.ran_away`) on the tail every :data:`CHECK_EVERY` pieces. When it trips,
the connection is closed, vLLM aborts the request, and the reply counts as cut and looped: the
shared layer asks once more with a firmer penalty, minutes earlier than ``max_tokens`` would
(measured: docs/design/stream.md).

The reply is put back into the non-streamed shape (``choices[0].message``, ``usage``), so the
backend reads both the same way. vLLM's ``continuous_usage_stats`` puts the token counts on every
piece: a reply cut here still records its prompt and completion tokens; only the cached count
(sent with the final usage) is missing.
"""

from __future__ import annotations

import json
from typing import Any

from agent.llm import heartbeat
from agent.llm.local_decoding import RUNAWAY_EVERY, RUNAWAY_WINDOW
from agent.repetition import loop_tail, ran_away

STREAM_FIELDS: dict[str, Any] = {
    "stream": True,
    "stream_options": {"include_usage": True, "continuous_usage_stats": True},
}
"""What turns a chat request into a stream with token counts on every piece (vLLM's fields)."""
CHECK_EVERY = RUNAWAY_EVERY
"""Content pieces (a token each, as vLLM streams) between two runaway checks: the embedded cadence."""
TAIL_CHARS = 4 * RUNAWAY_WINDOW
"""Characters of the reply's tail each check reads: the embedded window, at about four characters
a token."""


class StreamedReply:
    """Reads a server-sent-events chat reply chunk by chunk (``watch`` of
    :meth:`agent.llm.http.BoundedClient.request_stream`); says stop once the reply ran away."""

    def __init__(self, *, watch_runaway: bool = True) -> None:
        self.watch_runaway = watch_runaway
        self._reset()

    def _reset(self) -> None:
        self._buffer = b""
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._pieces = 0
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] = {}
        self.model: str | None = None
        self.error: str | None = None
        self.runaway = False

    def __call__(self, chunk: bytes) -> bool:
        """Take the next bytes (``b""``: a new attempt begins); True once reading may stop."""
        if not chunk:
            self._reset()
            return False
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            self._line(line.strip())
            if self.runaway or self.error is not None:
                return True  # what follows in this chunk is past the cut
        return False

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return  # a comment, an event name or the blank line between events
        payload = line[5:].strip()
        if payload == b"[DONE]":
            return
        try:
            event = json.loads(payload)
        except (ValueError, UnicodeDecodeError, RecursionError):
            self.error = f"a stream event that is not JSON: {payload[:120]!r}"
            return
        if not isinstance(event, dict):
            self.error = f"a stream event that is not an object: {payload[:120]!r}"
            return
        if event.get("error") is not None:
            error = event["error"]
            self.error = str(error.get("message") or error) if isinstance(error, dict) else str(error)
            return
        if isinstance(event.get("model"), str):
            self.model = event["model"]
        if isinstance(event.get("usage"), dict):
            self.usage = event["usage"]
            if isinstance(self.usage.get("completion_tokens"), int):
                heartbeat.note_tokens(self.usage["completion_tokens"])
        choices = event.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return  # the closing usage-only event
        choice = choices[0]
        delta = found if isinstance(found := choice.get("delta"), dict) else {}
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if isinstance(reasoning, str):
            self._reasoning.append(reasoning)
        if isinstance(choice.get("finish_reason"), str) and choice["finish_reason"]:
            self.finish_reason = choice["finish_reason"]
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._content.append(content)
            self._pieces += 1
            due = self._pieces % CHECK_EVERY == 0 and self.finish_reason is None  # a finished reply is kept
            if self.watch_runaway and due:
                content = "".join(self._content)
                tail = content[-TAIL_CHARS:]
                self.runaway = ran_away(tail, loop_tail(content, tail))

    def reply(self) -> dict[str, Any]:
        """The reply in the non-streamed shape; a runaway is finished as ``length``. (A stream
        that carried an error has :attr:`error` set: the caller raises it.)"""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self._content)}
        if self._reasoning:
            message["reasoning_content"] = "".join(self._reasoning)
        finish = "length" if self.runaway else self.finish_reason
        reply: dict[str, Any] = {
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": self.usage,
        }
        if self.model:
            reply["model"] = self.model
        return reply
