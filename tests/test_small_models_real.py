"""The small profile on the real tiny model (#16): its prose stays under the repetition guard's
threshold, on the embedded backend and through the CPU vLLM server.

The guard itself makes this hold: a reply over the threshold is rejected and re-asked (NstAgent)
or re-asked once (Magnet), so what is committed is measured here with the same function.
"""

from __future__ import annotations

import pytest

from agent.magnet.definition import parse_definition
from agent.magnet.runner import write_story as write_magnet
from agent.magnet.settings import MagnetSettings
from agent.nst.chapter.loop import ChapterLoop
from agent.nst.chapter.planned import Plan
from agent.nst.config import NstConfig
from agent.nst.state import NarrativeState
from agent.repetition import measure
from agent.settings import SMALL_PROSE, SMALL_PROSE_LONG_PROMPTS
from agent.store import RunStore
from tests.magnet.test_embedded_magnet import STORY

PLAN = {
    "outline": [
        {"id": 1, "title": "The letter", "description": "A keeper finds a letter from the future.", "target_words": 80},
        {"id": 2, "title": "The answer", "description": "She answers it.", "target_words": 80},
    ]
}
SMALL_MAGNET = {
    **MagnetSettings.profile_settings("small"),
    "max_revisions": 0,
    "action_tokens": 96,
    "critic_tokens": 200,
    "selection_tokens": 40,
    "paragraph_tokens": 120,
    "paragraph_min_tokens": 30,
    "goal_tokens": 60,
    "transition_tokens": 60,
}


def _magnet_step(llm, tmp_path) -> str:
    config = {
        **MagnetSettings.parse(SMALL_MAGNET).as_config(),
        "story": parse_definition(STORY, "lighthouse.toml").to_dict(),
    }
    store = RunStore.create(tmp_path / "magnet", pipeline="magnet", config=config, unit_kind="step")
    with store.sessions.hold("start"):
        write_magnet(store, llm, config, max_new_steps=1)
    narrator = [c for c in store.ledger.llm_calls() if c.role == "narrator"]
    text = "\n".join(p.text for p in store.paragraphs() if p.kind == "narration")
    store.close()
    assert narrator and all(c.sampling == SMALL_PROSE for c in narrator)
    return text


def _nst_chapter(llm, tmp_path) -> str:
    config = NstConfig.parse(
        {
            "prompt": "A keeper finds a letter from the future.",
            "words": 160,
            "max_turns": 6,
            "update_max_tokens": 400,
            "tool_max_tokens": 96,
            **NstConfig.profile_settings("small"),
        }
    )
    store = RunStore.create(tmp_path / "nst", pipeline="nst", config=config.stored())
    llm.recorders.append(store.ledger.recorder)
    llm.sampling_policy = config.sampling_for
    try:
        result = ChapterLoop(
            llm,
            store,
            plan=Plan.of(PLAN),
            story_prompt=config.prompt,
            state=NarrativeState(),
            index=1,
            config=config,
            ratio=1.4,
        ).run()
    finally:
        llm.recorders.remove(store.ledger.recorder)
        llm.sampling_policy = None
    prose = [c for c in store.ledger.llm_calls() if c.role == "nst_prose"]
    store.close()
    assert prose and all(c.sampling == SMALL_PROSE_LONG_PROMPTS for c in prose)
    return result.text


def _below_guard(text: str) -> None:
    found = measure(text)
    assert text.strip() and found.rate <= 0.35 and found.span_words < 24, (found, text[:300])


@pytest.mark.embedded
def test_small_profile_prose_on_the_embedded_model(embedded_llm, tmp_path):
    _below_guard(_magnet_step(embedded_llm, tmp_path))
    _below_guard(_nst_chapter(embedded_llm, tmp_path))


@pytest.mark.server
def test_small_profile_prose_through_the_vllm_server(endpoint_llm, tmp_path):
    _below_guard(_magnet_step(endpoint_llm, tmp_path))
    _below_guard(_nst_chapter(endpoint_llm, tmp_path))
