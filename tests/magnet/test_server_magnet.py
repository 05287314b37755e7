"""One Magnet timestep against each real server (vLLM CPU, llama-cpp-python); on vLLM the three
characters' requests also overlap in time (llama-cpp-python answers one request at a time)."""

from __future__ import annotations

import pytest

from agent.magnet.definition import load_definition
from agent.magnet.runner import write_story
from agent.magnet.settings import MagnetSettings
from agent.store import RunStore
from tests.magnet.test_definition import EXAMPLES


@pytest.mark.server
def test_one_step_of_three_characters(served, tmp_path):
    from agent.llm import open_llm

    llm = open_llm("endpoint", endpoint=served.endpoint, model=served.model, thinking="off")
    story = load_definition(next(p for p in EXAMPLES if p.stem == "thriller_museum"))
    assert len(story.characters) == 3
    settings = MagnetSettings(max_revisions=1, paragraph_tokens=120, paragraph_min_tokens=20)
    config = {**settings.as_config(), "story": story.to_dict()}
    store = RunStore.create(tmp_path / "run", pipeline="magnet", config=config, unit_kind="step")
    with store.sessions.hold("start"):
        write_story(store, llm, config, max_new_steps=1)
    llm.close()
    assert [s["step"] for s in store.steps()] == [1]
    # the first round is the three calls that started first: a call cut short and asked again can be
    # recorded before the round's slowest call ends (ledger rows are in the order calls end)
    rows = store.query(
        "SELECT created_at - latency_s AS started, created_at AS ended FROM llm_calls "
        "WHERE role = 'character' AND unit = 1 ORDER BY started LIMIT 3"
    )
    assert len(rows) == 3
    assert store.paragraphs()
    if llm.probe.kind != "vllm":
        return
    # the first round: every request started before any of them finished
    assert max(r["started"] for r in rows) < min(r["ended"] for r in rows), [tuple(r) for r in rows]
