"""The server's ``/tokenize`` counter goes through a bounded client: the root path beside ``/v1``,
the run's credentials, a time budget and a size cap (a hostile server cannot hang a run's budget)."""

from __future__ import annotations

import time

import pytest

from agent.llm.context import CharsEstimate, ServerCounter, counter_for
from agent.llm.endpoint import EndpointLLM
from agent.llm.http import HttpLimits
from agent.testing.hostile import HostileServer

ASK = [{"role": "user", "content": "How many tokens is this?"}]


@pytest.fixture
def servers():
    made: list[HostileServer] = []
    yield lambda behaviour: made.append(HostileServer(behaviour)) or made[-1]
    for server in made:
        server.close()


def test_a_server_that_tokenizes_is_asked_at_its_root(servers):
    server = servers("custom")
    server.custom = lambda body: (200, {"count": 7 + len(body["messages"])})
    llm = EndpointLLM(server.url.replace("http://", "http://me:pa55@"), "m", limits=HttpLimits(call_budget_s=5))
    try:
        counter = counter_for(llm)
        assert isinstance(counter, ServerCounter) and counter.count(ASK) == 8
        assert server.posted()[-1].path == "/tokenize"  # beside /v1, not under it
    finally:
        llm.close()


@pytest.mark.parametrize("behaviour", ["endless", "silent", "garbage"])
def test_a_hostile_tokenize_falls_back_to_the_estimate_in_bounded_time(servers, behaviour):
    server = servers(behaviour)
    llm = EndpointLLM(server.url, "m", limits=HttpLimits(call_budget_s=2))
    started = time.monotonic()
    try:
        assert isinstance(counter_for(llm), CharsEstimate)
    finally:
        llm.close()
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(
    "thinking, sent", [("off", {"enable_thinking": False}), ("on", {"enable_thinking": True}), ("auto", None)]
)
def test_the_count_renders_the_template_with_the_thinking_switch_every_request_sends(servers, thinking, sent):
    # a Qwen3 hybrid's template adds an empty think block when thinking is off: counted without the
    # switch, every request is undercounted by those tokens
    server = servers("custom")
    server.custom = lambda body: (200, {"count": 5})
    llm = EndpointLLM(server.url, "m", limits=HttpLimits(call_budget_s=5), thinking=thinking)
    try:
        counter_for(llm).count(ASK)
        tokenize = [c.body for c in server.posted() if c.path == "/tokenize"]
        assert tokenize and all(b.get("chat_template_kwargs") == sent for b in tokenize)
    finally:
        llm.close()
