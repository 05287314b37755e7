"""Structured replies from vLLM are streamed and watched (agent.llm.stream): a reply that runs away
is cut where it runs away, not at max_tokens; a normal one reads exactly as unstreamed.

A fake vLLM (agent.testing.kinds' routes) streams server-sent events from a script
and counts what it sent before the client left. The real CPU vLLM server's check is in
tests/test_vllm_server.py."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agent.llm import open_llm
from agent.llm.local_decoding import RunawayCheck
from agent.llm.stream import TAIL_CHARS, StreamedReply
from agent.llm.types import LLMError, TruncatedOutputError
from agent.repetition import loop_tail, ran_away
from agent.testing.kinds import MODEL, KindServer
from agent.testing.server import Answer, Call, Stream

USER = [{"role": "user", "content": "Say it."}]
SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}


class StreamingVllm(KindServer):
    """A fake vLLM (:class:`agent.testing.kinds.KindServer`) that answers a ``stream`` request with
    ``script(body)``'s events (dicts, sent as ``data:`` lines, one piece at a time) and counts the
    pieces it sent before the stream ended or the client left."""

    def __init__(self) -> None:
        super().__init__("vllm")
        self.sent: list[int] = []
        self.script: Any = None

    @property
    def bodies(self) -> list[Any]:
        return self.chats()

    def post(self, call: Call) -> Answer | Stream:
        if not call.body.get("stream"):
            return super().post(call)
        return Stream(self.events(call.body), content_type="text/event-stream", close=True)

    def events(self, body: Any) -> Iterator[bytes]:
        sent = 0
        try:
            for event in self.script(body):
                yield b"data: " + json.dumps(event).encode() + b"\n\n"
                sent += 1
            yield b"data: [DONE]\n\n"
        finally:
            self.sent.append(sent)


def piece(content: str, n: int, finish: str | None = None) -> dict[str, Any]:
    """One streamed piece with vLLM's continuous usage (prompt 40 tokens, ``n`` so far)."""
    return {
        "model": MODEL,
        "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 40, "completion_tokens": n, "total_tokens": 40 + n},
    }


def closing_usage(n: int, cached: int) -> dict[str, Any]:
    return {
        "model": MODEL,
        "choices": [],
        "usage": {"prompt_tokens": 40, "completion_tokens": n, "prompt_tokens_details": {"cached_tokens": cached}},
    }


@pytest.fixture
def vllm():
    server = StreamingVllm()
    yield server
    server.close()


def _open(server: StreamingVllm):
    llm = open_llm("endpoint", endpoint=server.root, thinking="off")
    assert llm.kind == "vllm"
    records: list[Any] = []
    llm.recorders.append(records.append)
    return llm, records


def test_a_streamed_structured_reply_reads_as_an_unstreamed_one(vllm):
    pieces = ['{"a": ', '"the tide', ' turned"', "}"]

    def script(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield {"model": MODEL, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        for i, text in enumerate(pieces, 1):
            yield piece(text, i, "stop" if i == len(pieces) else None)
        yield closing_usage(len(pieces), cached=32)

    vllm.script = script
    llm, records = _open(vllm)
    reply = llm.generate(USER, SCHEMA, temperature=0, max_tokens=200)
    assert reply.parsed == {"a": "the tide turned"} and reply.finish_reason == "stop"
    assert (reply.usage.prompt_tokens, reply.usage.cached_prompt_tokens, reply.usage.completion_tokens) == (40, 32, 4)
    body = vllm.bodies[-1]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert body["response_format"]["type"] == "json_schema"  # the constraint travels as before
    assert records[-1].text == '{"a": "the tide turned"}' and records[-1].completion_tokens == 4
    llm.generate(USER, None, temperature=0, max_tokens=20)
    assert "stream" not in vllm.bodies[-1]  # prose is not streamed: nothing to cut it on
    llm.close()


def test_a_runaway_structured_reply_is_cut_where_it_runs_away_and_asked_once_more(vllm):
    """The server would stream 20,000 pieces of "la "; the client leaves after the first check
    that sees the loop (32 pieces), twice: the first ask and the firmer one."""

    def script(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield piece('{"a": "', 1)
        for n in range(2, 20_000):
            yield piece("la ", n)
            time.sleep(0.001)

    vllm.script = script
    llm, records = _open(vllm)
    started = time.monotonic()
    with pytest.raises(TruncatedOutputError, match="ran away and was stopped after") as caught:
        llm.generate(USER, SCHEMA, temperature=0, max_tokens=20_000)
    assert caught.value.looped
    assert time.monotonic() - started < 10  # 40 s if each stream ran to its end
    asked = [b for b in vllm.bodies if b.get("stream")]
    assert len(asked) == 2  # the ask and the firmer ask
    assert asked[1]["repetition_penalty"] > asked[0].get("repetition_penalty", 1.0)
    deadline = time.monotonic() + 5
    while len(vllm.sent) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(n < 200 for n in vllm.sent), vllm.sent  # the server saw the client leave
    assert [r.completion_tokens for r in records] == [32, 32]  # counted from the continuous usage
    assert all(r.prompt_tokens == 40 and r.finish_reason == "length" for r in records)
    llm.close()


def test_a_long_reply_that_does_not_loop_is_not_cut(vllm):
    words = [
        "harbour",
        "lantern",
        "keeper",
        "tide",
        "gull",
        "rope",
        "salt",
        "ledger",
        "widow",
        "captain",
        "crown",
        "silver",
        "mark",
        "debt",
        "pier",
        "lamp",
        "room",
        "nephew",
        "fisherman",
        "storm",
        "key",
        "door",
        "window",
        "stair",
        "rock",
        "wave",
        "boat",
        "net",
        "oar",
    ]

    def script(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield piece('{"a": "', 1)
        pick = random.Random(5).choice  # no phrase comes back: nothing loops
        for n in range(2, 600):
            yield piece(f"{pick(words)} ", n)
        yield piece('"}', 600, "stop")

    vllm.script = script
    llm, _ = _open(vllm)
    reply = llm.generate(USER, SCHEMA, temperature=0, max_tokens=1000)
    assert reply.finish_reason == "stop" and len(reply.parsed["a"].split()) == 598
    llm.close()


def test_an_error_inside_the_stream_is_one_line_naming_the_endpoint(vllm):
    def script(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield piece('{"a": ', 1)
        yield {"error": {"message": "engine died\nwhile decoding", "code": 500}}

    vllm.script = script
    llm, _ = _open(vllm)
    with pytest.raises(LLMError) as caught:
        llm.generate(USER, SCHEMA, temperature=0, max_tokens=50)
    message = str(caught.value)
    assert "\n" not in message and vllm.root in message and "engine died while decoding" in message
    llm.close()


def test_the_in_flight_check_sees_phrase_loops_and_runaway_characters_but_not_json_lists():
    phrase = "One day they'd return home where? " * 12
    assert ran_away(phrase)  # a 34-character phrase: too long for the periodic check alone
    assert ran_away('{"a": "' + "9" * 60)
    items = ", ".join(
        json.dumps({"name": f"Person {i}", "location": place, "status": mood})
        for i, (place, mood) in enumerate(
            zip(
                ["the pier", "the lamp room", "the office", "the dock", "the stair", "the boat"],
                ["calm", "afraid", "angry", "tired", "hopeful", "silent"],
                strict=True,
            )
        )
    )
    assert not ran_away('{"characters": [' + items)


QUOTED = "The effect of the passage is to take the keeper to a different scene by the lamp."
NEXT = "The effect of the passage is to take the keeper to a new scene on the stair."


def _update(*entries: str) -> str:
    return '{"tool": "update", "add_past_event": [' + ", ".join(entries)


def _entry(description: str, evidence: str) -> str:
    return json.dumps({"key": "effect", "description": description, "evidence": evidence})


def _stopped_by_the_engine_check(text: str) -> bool:
    """``RunawayCheck`` as an in-process engine runs it, one character a token (a window of
    ``TAIL_CHARS`` characters: about the 192 tokens an engine reads)."""
    check = RunawayCheck(lambda ids: "".join(map(chr, ids)), every=32, window=TAIL_CHARS)
    ids = [ord(c) for c in text]
    return any(check(ids[:n]) for n in range(1, len(ids) + 1))


def _stopped_by_the_stream_check(text: str) -> bool:
    """``StreamedReply`` reading a server's stream, one character a piece."""
    reply = StreamedReply()
    for c in text:
        reply(b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": c}}]}).encode() + b"\n\n")
    return reply.runaway


def test_a_quote_of_an_earlier_field_is_not_a_loop_but_an_entry_listed_again_is():
    """An update's evidence copies its own description by design (a 135M model's update, nearly done,
    was stopped as a runaway for it); one entry listed again and again still reads as a loop."""
    requirement = '], "add_future_requirement": [' + _entry(NEXT, NEXT) + '], "resolve_future_requirement": []}'
    quoted = _update(_entry(QUOTED, f"<i>{QUOTED}</i>")) + requirement
    assert ran_away(quoted[-TAIL_CHARS:])  # what the tail alone reads: half its 4-grams repeat
    assert not ran_away(quoted[-TAIL_CHARS:], loop_tail(quoted, quoted[-TAIL_CHARS:]))
    assert not _stopped_by_the_engine_check(quoted) and not _stopped_by_the_stream_check(quoted)
    again = _update(*[_entry(QUOTED, "the lamp was lit at nine and the keeper went up")] * 4)
    assert ran_away(again[-TAIL_CHARS:], loop_tail(again, again[-TAIL_CHARS:]))
    assert _stopped_by_the_engine_check(again) and _stopped_by_the_stream_check(again)
    looping = _update(_entry(QUOTED, QUOTED + " and the bell rang" * 12))
    assert _stopped_by_the_engine_check(looping)  # a quote that then loops is still a loop
