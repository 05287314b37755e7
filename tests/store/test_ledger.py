"""The LLM call ledger (the LLM layer's recorder) and the tool call ledger."""

from __future__ import annotations

import threading

from agent.llm.base import LLM, Request
from agent.llm.types import CallRecord, LLMError, RawReply, Usage


class CountingLLM(LLM):
    """Replies with the request's last message; fails when asked to."""

    backend = "scripted"

    def _complete(self, request: Request) -> RawReply:
        content = request.messages[-1]["content"]
        if content.startswith("fail"):
            raise LLMError("server went away")
        return RawReply(text=f"re: {content}", finish_reason="stop", usage=Usage(50, 20, 3), model="tiny")


def _record(i: int) -> CallRecord:
    return CallRecord(role="writer", backend="endpoint", model="m", temperature=0.7, max_tokens=100,
                      schema_name="write" if i % 2 else None, prompt_tokens=i, cached_prompt_tokens=i // 2,
                      completion_tokens=1, latency_s=0.01 * i, finish_reason="stop",
                      messages=[{"role": "system", "content": "You write novels."},
                                {"role": "user", "content": f"call {i}"}], text=f"reply {i}")


def test_recorder_writes_every_call_from_many_threads(store):
    threads = [threading.Thread(target=lambda n=n: [store.recorder(_record(n * 50 + i)) for i in range(50)])
               for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    calls = store.llm_calls()
    assert len(calls) == 400
    assert sorted(c.prompt_tokens for c in calls) == list(range(400))
    by_tokens = {c.prompt_tokens: c for c in calls}
    for i in (0, 1, 199, 399):  # each row is whole: fields of one call never mix with another's
        assert by_tokens[i] == _record(i)
    # the shared system message is stored once
    assert store.query("SELECT count(*) FROM llm_messages")[0][0] == 401


def test_recorder_hooks_into_the_llm_layer_including_failures(store):
    llm = CountingLLM("tiny")
    llm.recorders.append(store.recorder)
    from agent.llm.base import Request as Req

    results = llm.generate_many([Req([{"role": "user", "content": f"hi {i}"}], max_tokens=8, role="critic")
                                 for i in range(5)] + [Req([{"role": "user", "content": "fail"}], max_tokens=8)],
                                return_exceptions=True)
    assert isinstance(results[-1], LLMError)
    calls = store.llm_calls()
    assert len(calls) == 6
    assert [c.role for c in calls[:5]] == ["critic"] * 5 and calls[0].text == "re: hi 0"
    assert calls[5].error == "server went away" and calls[5].prompt_tokens == 0
    assert store.query("SELECT DISTINCT unit FROM llm_calls")[0][0] == 1  # filed under the unit in flight


def test_ledger_rows_survive_a_lost_unit_and_name_their_unit(store):
    store.record_tool_call(turn=1, tool="search", arguments={"query": "lantern"}, result="[]")
    store.record_tool_call(turn=2, tool="write", arguments={"title": "x"}, ok=False, error="too short: 120 words")
    store.recorder(_record(3))
    # the unit is lost (never committed): its calls stay counted, filed under unit 1
    tools = store.tool_calls(1)
    assert [(t.tool, t.ok, t.error) for t in tools] == [("search", True, None),
                                                        ("write", False, "too short: 120 words")]
    assert tools[0].arguments == {"query": "lantern"}
    store.commit_chapter(1, "One", "Text.", state={})
    store.unit_in_flight = 0  # planning work, for example
    store.recorder(_record(4))
    assert [r[0] for r in store.query("SELECT unit FROM llm_calls ORDER BY id")] == [1, 0]
