"""The embedded tiny model as a judge: its consistency replies are schema-valid and stored, and at
least one of them succeeds (a run where every judgment failed fails the test)."""

from __future__ import annotations

import pytest

from agent.eval.ced import consistency_scores
from agent.eval.consistency import judge_consistency
from agent.eval.judge import Judge
from agent.eval.story import load_story
from agent.store import RunStore
from agent.store import judgments as stored
from grammars.judges import CATEGORIES
from tests.eval.helpers import make_run

pytestmark = pytest.mark.embedded


def test_tiny_model_consistency_replies_are_schema_valid(embedded_llm, tmp_path):
    run = make_run(
        tmp_path,
        "tiny",
        [
            "Mara had green eyes. She lived in the north tower.",
            "Mara had blue eyes. She had always lived in the south tower.",
        ],
    )
    with RunStore.open(run) as store:
        story = load_story(store)
        _, counts = judge_consistency(store, story, Judge(embedded_llm, "tiny", max_tokens=384))
        assert counts["ok"] + counts["failed"] == 5
        for seed in (1, 2):  # a rerun with another seed fills in only the failed categories
            if counts["ok"]:
                break
            _, counts = judge_consistency(store, story, Judge(embedded_llm, "tiny", max_tokens=384, seed=seed))
        rows = stored.select(store, "consistency")
        assert len(rows) == 5
        assert any(row.ok for row in rows), f"every judgment failed: {[row.error for row in rows]}"
        for row in rows:
            if row.ok:  # validated against the closed grammar by the LLM layer, and stored as such
                for item in row.reply["contradictions"]:
                    assert item["subtype"] in CATEGORIES[row.item]
            else:  # a truncated reply is recorded as failed, never as zero errors
                assert row.error
        [score] = consistency_scores(store, story)
        assert score.complete == all(row.ok for row in rows)
