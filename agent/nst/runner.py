"""The ``nst`` pipeline: plan once, then write, check and commit one chapter at a time.

Each committed chapter carries the state after it (the narrative state, the measured
tokens-per-word ratio and the chapter's statistics), so any chapter's context can be rebuilt
and a resume continues from the last committed chapter with exactly that state.
"""

from __future__ import annotations

from typing import Any

from agent import pipelines
from agent.llm import LLM
from agent.nst import progress
from agent.nst.config import NST_DEFAULTS
from agent.nst.length import initial_ratio
from agent.nst.loop import ChapterLoop
from agent.nst.planning import frozen_plan
from agent.nst.state import NarrativeState
from agent.store import RunStore


def write_story(store: RunStore, llm: LLM, config: dict[str, Any]) -> None:
    """Continue the run from ``store.next_unit()`` to the last chapter of the plan."""
    config = {**NST_DEFAULTS, **config}
    plan = frozen_plan(store, llm, config)
    outline = plan["outline"]
    store.set_target(len(outline))
    last = store.info().last_unit
    previous = store.state(last) if last else None
    previous = previous if isinstance(previous, dict) else {}
    state = NarrativeState.from_json(previous.get("narrative"))
    ratio = float(previous.get("tokens_per_word") or initial_ratio(config["prompt"], config["tokens_per_word"]))
    for index in range(store.next_unit(), len(outline) + 1):
        progress.emit({"event": "chapter", "chapter": index, "chapters": len(outline)})
        result = ChapterLoop(llm, store, plan=plan, story_prompt=config["prompt"], state=state, index=index,
                             config=config, ratio=ratio, progress=progress.emit).run()
        if result.state is not None:
            state = result.state
        ratio = result.ratio
        snapshot = {"narrative": state.to_json() if config["state"] else None, "tokens_per_word": ratio,
                    "chapter": result.stats}
        store.commit_chapter(index, result.title, result.text, state=snapshot, degraded=result.degraded,
                             degraded_reason=result.reason)
        progress.emit({"event": "committed", "chapter": index, "chapters": len(outline),
                       "words": result.stats["words"], "degraded": result.degraded})
    store.finish()


PIPELINE = pipelines.register(
    pipelines.Pipeline("nst", "chapter", pipelines.writer_runner(write_story), version="1", defaults=NST_DEFAULTS)
)
