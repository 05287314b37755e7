"""One chapter against each real server (vLLM CPU, llama-cpp-python); on vLLM later turns are also
seen reusing the earlier turns' prefix (llama-cpp-python does not report cached tokens)."""

from __future__ import annotations

import pytest

from agent.nst.config import NST_DEFAULTS
from agent.nst.loop import ChapterLoop
from agent.nst.state import NarrativeState
from agent.store import RunStore

PLAN = {"outline": [{"id": 1, "title": "The wish", "description": "A fisherman catches a talking fish.",
                     "target_words": 80},
                    {"id": 2, "title": "The price", "description": "The wish comes true at a cost.",
                     "target_words": 80}]}


@pytest.mark.server
def test_one_chapter(tmp_path, served):
    from agent.llm import open_llm

    config = {**NST_DEFAULTS, "prompt": "A fisherman finds a talking fish.", "words": 160, "max_turns": 6,
              "update_max_tokens": 400, "tool_max_tokens": 96}
    store = RunStore.create(tmp_path / "run", pipeline="nst", config=config)
    llm = open_llm("endpoint", endpoint=served.endpoint, model=served.model, thinking="off")
    llm.recorders.append(store.recorder)
    try:
        result = ChapterLoop(llm, store, plan=PLAN, story_prompt=config["prompt"], state=NarrativeState(), index=1,
                    config=config, ratio=1.4).run()
    finally:
        llm.close()
    calls = store.llm_calls()
    assert len(calls) >= 2 and result.text.strip()
    if llm.probe.kind == "vllm":
        assert any(c.cached_prompt_tokens > 0 for c in calls[1:]), [(c.role, c.cached_prompt_tokens) for c in calls]
    store.close()
