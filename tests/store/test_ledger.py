"""The LLM call ledger (the LLM layer's recorder) and the tool call ledger."""

from __future__ import annotations

import threading

import pytest

from agent.llm.base import Request
from agent.llm.types import CallRecord, LLMError, Usage
from agent.testing.scripted import ScriptedLLM


def echo_or_fail(request: Request) -> str | LLMError:
    """The request's last message back, or a failure when it asks for one."""
    content = request.messages[-1]["content"]
    return LLMError("server went away") if content.startswith("fail") else f"re: {content}"


def _record(i: int) -> CallRecord:
    return CallRecord(
        role="writer",
        backend="endpoint",
        model="m",
        temperature=0.7,
        max_tokens=100,
        schema_name="write" if i % 2 else None,
        prompt_tokens=i,
        cached_prompt_tokens=i // 2,
        completion_tokens=1,
        latency_s=0.01 * i,
        finish_reason="stop",
        messages=[{"role": "system", "content": "You write novels."}, {"role": "user", "content": f"call {i}"}],
        text=f"reply {i}",
    )


def test_recorder_writes_every_call_from_many_threads(store):
    threads = [
        threading.Thread(target=lambda n=n: [store.ledger.recorder(_record(n * 50 + i)) for i in range(50)])
        for n in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    calls = store.ledger.llm_calls()
    assert len(calls) == 400
    assert sorted(c.prompt_tokens for c in calls) == list(range(400))
    by_tokens = {c.prompt_tokens: c for c in calls}
    for i in (0, 1, 199, 399):  # each row is whole: fields of one call never mix with another's
        assert by_tokens[i] == _record(i)
    # the shared system message is stored once
    assert store.query("SELECT count(*) FROM llm_messages")[0][0] == 401


def test_recorder_hooks_into_the_llm_layer_including_failures(store):
    llm = ScriptedLLM(echo_or_fail, model="tiny", usage=Usage(50, 20, 3))
    llm.recorders.append(store.ledger.recorder)
    from agent.llm.base import Request as Req

    results = llm.generate_many(
        [Req([{"role": "user", "content": f"hi {i}"}], max_tokens=8, role="critic") for i in range(5)]
        + [Req([{"role": "user", "content": "fail"}], max_tokens=8)],
        return_exceptions=True,
    )
    assert isinstance(results[-1], LLMError)
    calls = store.ledger.llm_calls()
    assert len(calls) == 6
    assert [c.role for c in calls[:5]] == ["critic"] * 5 and calls[0].text == "re: hi 0"
    assert calls[5].error == "server went away" and calls[5].prompt_tokens == 0
    assert store.query("SELECT DISTINCT unit FROM llm_calls")[0][0] == 1  # filed under the unit in flight


def test_ledger_rows_survive_a_lost_unit_and_name_their_unit(store):
    store.ledger.record_tool_call(turn=1, tool="search", arguments={"query": "lantern"}, result="[]")
    store.ledger.record_tool_call(
        turn=2, tool="write", arguments={"title": "x"}, ok=False, error="too short: 120 words"
    )
    store.ledger.recorder(_record(3))
    # the unit is lost (never committed): its calls stay counted, filed under unit 1
    tools = store.ledger.tool_calls(1)
    assert [(t.tool, t.ok, t.error) for t in tools] == [
        ("search", True, None),
        ("write", False, "too short: 120 words"),
    ]
    assert tools[0].arguments == {"query": "lantern"}
    store.commit_chapter(1, "One", "Text.", state={})
    store.db.unit_in_flight = 0  # planning work, for example
    store.ledger.recorder(_record(4))
    assert [r[0] for r in store.query("SELECT unit FROM llm_calls ORDER BY id")] == [1, 0]


def test_each_call_keeps_where_its_time_went_and_show_sums_it_per_role(store, capsys):
    """#35: an in-process call's split (restore, compile, prefill, decode, mask, sample, alongside) is kept in
    its ledger row and ``fabula show RUN --timing`` sums it per role; a server's call has none."""
    import json

    from agent.cli import main
    from agent.llm.types import CallTiming
    from agent.store.reports.costs import per_role_timing

    split = CallTiming(restore=0.5, compile=1.0, prefill=2.0, decode=4.0, mask=0.25, sample=0.25)
    timed = CallRecord(
        role="nst_turn",
        backend="embedded",
        model="m",
        temperature=0.7,
        max_tokens=100,
        schema_name="UpdateCall",
        prompt_tokens=6000,
        cached_prompt_tokens=5900,
        completion_tokens=40,
        latency_s=8.5,
        finish_reason="stop",
        timing=split,
    )
    store.ledger.recorder(timed)
    store.ledger.recorder(timed)
    store.ledger.recorder(_record(7))  # a server's call: latency only
    assert store.ledger.llm_calls()[0].timing == split and store.ledger.llm_calls()[2].timing is None
    turn, writer, total = per_role_timing(store)
    assert (turn.role, turn.calls, turn.timed, turn.parts["decode"], turn.decode_rate) == ("nst_turn", 2, 2, 8.0, 10.0)
    assert turn.other == pytest.approx(1.0)  # 2 x (8.5 - 8.0): templating, detokenizing, checks
    assert (writer.timed, writer.decode_rate, total.calls, total.parts["prefill"]) == (0, None, 3, 4.0)
    assert total.decode_rate == 10.0  # the server's token has no decode time: left out of the rate
    run_dir = str(store.run_dir)
    store.close()
    assert main(["show", run_dir, "--timing"]) == 0
    out = capsys.readouterr().out
    row = next(line.split() for line in out.splitlines() if line.strip().startswith("nst_turn"))
    parts = ["1.0", "2.0", "4.0", "8.0", "0.5", "0.5", "0.0"]  # restore ... sample, alongside
    assert row[1:] == ["2", "12000", "11800", "80", "17.0", *parts, "1.0", "10.0"]
    assert main(["show", run_dir, "--timing", "--json"]) == 0
    timing = json.loads(capsys.readouterr().out)["timing"]
    assert timing[0]["decode_s"] == 8.0 and timing[1]["timed_calls"] == 0 and timing[2]["role"] == "total"


def test_a_units_model_time_counts_calls_under_way_together_once(store):
    """#35: calls decoded together (or sent to a server at once) overlap; the ledger page's model
    time per unit is the time any of them was under way, not the sum of their latencies."""
    import sqlite3

    from agent.store.reports.costs import busy_seconds, per_unit

    for _ in range(3):
        store.ledger.recorder(_record(100))  # latency 1 s each
    run_db = store.run_dir / "run.db"
    store.close()
    with sqlite3.connect(run_db) as db:  # two ended together (one batch), the third 2 s later
        for row, ended in ((1, 50.0), (2, 50.0), (3, 52.0)):
            db.execute("UPDATE llm_calls SET created_at = ? WHERE id = ?", (ended, row))
    from agent.store import RunStore

    with RunStore.open(store.run_dir, readonly=True) as again:
        (unit,) = per_unit(again)
    assert unit.calls == 3 and unit.latency_s == pytest.approx(2.0)
    assert busy_seconds([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.6)]) == pytest.approx(4.0)
