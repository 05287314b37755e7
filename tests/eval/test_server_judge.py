"""A real OpenAI-compatible judge: ``fabula eval consistency`` against the CPU vLLM server."""

from __future__ import annotations

import pytest

from agent.cli import main
from agent.store import RunStore
from agent.store import judgments as stored
from grammars.judges import CATEGORIES
from tests.eval.helpers import make_run

pytestmark = pytest.mark.server


def test_consistency_through_the_cli_against_the_server(tmp_path, vllm_server, capsys):
    run = make_run(tmp_path, "story", ["Mara had green eyes. She lived in the north tower.",
                                       "Mara had blue eyes. She had always lived in the south tower."])
    judge = ["--judge-endpoint", vllm_server.endpoint, "--judge-model", vllm_server.model,
             "--judge-max-tokens", "256"]
    code = main(["eval", "consistency", str(run), *judge])
    with RunStore.open(run, readonly=True) as store:
        rows = stored.select(store, "consistency")
    assert len(rows) == 5 and {r.judge for r in rows} == {vllm_server.model}
    assert code == (1 if any(not r.ok for r in rows) else 0)  # a failed judgment fails the command
    for row in rows:
        if row.ok:  # the server's structured output held the closed per-category grammar
            assert row.prompt_tokens > 0
            assert all(item["subtype"] in CATEGORIES[row.item] for item in row.reply["contradictions"])
        else:  # e.g. cut at --judge-max-tokens: recorded as failed, never as zero errors
            assert row.error
    ok_before = {r.item: r.updated_at for r in rows if r.ok}
    main(["eval", "consistency", str(run), *judge])  # a rerun fills in only what is missing
    with RunStore.open(run, readonly=True) as store:
        again = {r.item: r.updated_at for r in stored.select(store, "consistency") if r.ok}
    assert all(again[item] == when for item, when in ok_before.items())
    capsys.readouterr()
