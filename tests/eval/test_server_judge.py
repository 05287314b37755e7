"""A real OpenAI-compatible judge: ``fabula eval consistency`` against the CPU vLLM server.

The tiny model is not a good judge (on some categories it repeats list items until
--judge-max-tokens), but its replies must be real: at least one category judgment has to
succeed (reruns with other seeds fill in only the failed ones), and a CED is computed from
each real reply (the story's own CED once all five categories have one). A run where every
judgment failed fails the test, so the check cannot pass on errors alone.
"""

from __future__ import annotations

import pytest

from agent.cli import main
from agent.eval.ced import best_scores, ced
from agent.eval.story import load_story
from agent.store import RunStore
from agent.store import judgments as stored
from grammars.judges import CATEGORIES
from tests.eval.helpers import make_run

pytestmark = [pytest.mark.server, pytest.mark.slow]
"""177 s in CI (#35): .ci/scheduled runs it; CI keeps the tiny model's real judgments
(tests/eval/test_embedded_judge.py) and the server's structured replies (tests/test_vllm_server.py)."""
SEEDS = (0, 1, 2, 3)


def test_consistency_through_the_cli_against_the_server(tmp_path, vllm_server, capsys):
    run = make_run(
        tmp_path,
        "story",
        [
            "Mara had green eyes. She lived in the north tower.",
            "Mara had blue eyes. She had always lived in the south tower.",
        ],
        target=20,
    )
    judge = ["--judge-endpoint", vllm_server.endpoint, "--judge-model", vllm_server.model, "--judge-max-tokens", "512"]
    codes = []
    for seed in SEEDS:  # a rerun fills in only what is missing, with a fresh seed
        codes.append(main(["eval", "consistency", str(run), *judge, "--judge-seed", str(seed)]))
        with RunStore.open(run, readonly=True) as store:
            rows = stored.select(store, "consistency")
        assert codes[-1] == (1 if any(not r.ok for r in rows) else 0)  # a failed judgment fails the command
        if all(r.ok for r in rows):
            break
    out = capsys.readouterr().out
    assert len(rows) == 5 and {r.judge for r in rows} == {vllm_server.model}
    ok = [r for r in rows if r.ok]
    assert ok, f"every judgment failed after {len(codes)} attempts: {[r.error for r in rows]}"
    for row in rows:
        if row.ok:  # the server's structured output held the closed per-category grammar
            assert row.prompt_tokens > 0 and row.completion_tokens > 0
            assert all(item["subtype"] in CATEGORIES[row.item] for item in row.reply["contradictions"])
            assert row.meta["judge_setup"]["model"] == vllm_server.model
        else:  # e.g. cut at --judge-max-tokens: recorded as failed, never as zero errors
            assert row.error
    with RunStore.open(run, readonly=True) as store:
        story = load_story(store)
        scores = best_scores(store, story)
    for row in ok:  # the CED of a real judge reply, per judged category
        found = len(row.reply["contradictions"])
        print(
            f"real judge reply, {row.item}: {found} contradiction(s), "
            f"instance CED {ced(found, row.meta['window']['checked_words']):.2f} per 10K words"
        )
        assert row.meta["window"]["checked_words"] == story.words
    if len(ok) == 5:  # every category answered: the story's CED, as the report prints it
        [score] = scores
        metrics = score.metrics()
        assert metrics["instances"] == sum(len(r.reply["contradictions"]) for r in ok)
        assert f"instance CED {metrics['instance_ced']:.2f}" in out
    else:
        assert scores == []  # a story with a failed category is not scored, never zero
    ok_before = {r.item: r.updated_at for r in ok}
    code = main(["eval", "consistency", str(run), *judge, "--judge-seed", "9"])  # fills in only what is missing
    with RunStore.open(run, readonly=True) as store:
        after = stored.select(store, "consistency")
    assert code == (1 if any(not r.ok for r in after) else 0)
    again = {r.item: r.updated_at for r in after if r.ok}
    assert all(again[item] == when for item, when in ok_before.items())  # a kept reply is never replaced
    if len(ok) == 5:
        assert "0 judged, 0 failed, 5 already stored" in capsys.readouterr().out
