"""A batch of three tiny Direct stories on the real embedded model: one loaded model, one story
at a time, every story an ordinary completed run."""

from __future__ import annotations

import json
import time

import pytest

from agent import batch
from agent.llm.options import LLMOptions
from agent.store import RunStore
from tests.batch.folders import story_dir


@pytest.mark.embedded
def test_a_batch_of_three_tiny_stories_on_the_embedded_model(tmp_path, embedded_llm, monkeypatch):
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "\n".join(
            json.dumps({"id": i, "prompt": p})
            for i, p in enumerate(
                [
                    "A fisherman finds a talking fish.",
                    "A girl builds a kite that flies at night.",
                    "An old clock stops every time someone lies.",
                ],
                1,
            )
        )
        + "\n"
    )
    notes: list[str] = []
    started = time.monotonic()
    result = batch.run_batch(
        tmp_path / "batch",
        "direct",
        prompts=prompts,
        words=40,
        profile="small",
        settings={"attempts": 1},
        llm=LLMOptions("embedded"),
        concurrency=3,
        model=embedded_llm,
        sink=lambda u: notes.append(u.detail) if u.kind == "note" else None,
    )
    wall = time.monotonic() - started
    assert result.complete and result.concurrency == 1 and len(result.stories) == 3
    assert notes == ["the shared model writes one story at a time (--concurrency 3 is taken as 1)"]
    for row in result.stories:
        with RunStore.open(story_dir(tmp_path / "batch", row.key), readonly=True) as store:
            assert store.info().status == "completed" and store.info().backend == "embedded"
            assert len(store.chapters()) == 1 and store.words_written() == row.words > 0
            assert row.calls == len(store.ledger.llm_calls()) >= 1 and row.completion_tokens > 0
    print(
        f"3 Direct stories on the embedded model: {wall:.1f} s, words {[r.words for r in result.stories]}, "
        f"calls {[r.calls for r in result.stories]}"
    )
