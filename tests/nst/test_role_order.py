"""Every request the scripted pipelines send alternates user and assistant after one optional system
message: Gemma's chat template (and vLLM with it) refuses anything else with a 400 on every retry."""

from __future__ import annotations

import json

import pytest

from agent.llm.roles import add_turn, role_order_error
from agent.magnet.runner import write_story
from agent.magnet.settings import MagnetSettings
from agent.nst.chapter.loop import ChapterLoop
from agent.nst.chapter.planned import Plan
from agent.nst.config import NstConfig
from agent.nst.state import NarrativeState
from agent.store import RunStore
from agent.testing.author import Author, chapter_text, quotes_from
from agent.testing.scripted import ScriptedLLM
from agent.testing.story_llm import StoryLLM
from tests.magnet.stories import story

PLAN = {
    "outline": [
        {"id": i, "title": f"Part {i}", "description": f"Part {i} happens.", "target_words": 100} for i in range(1, 4)
    ]
}


def fallback_author() -> Author:
    """No draft passes, the full update past the turn cap is invalid, the one-event update applies:
    the path that used to send the cap's ask, then the one-event ask, right after a user turn."""
    return Author(
        length=lambda request, attempt: 20,
        policy=lambda request, tools: (
            json.dumps(
                {
                    "add_past_event": [
                        {
                            "key": "the_storm",
                            "description": "A storm broke the pier.",
                            "evidence": quotes_from(chapter_text(request), 1)[0],
                        }
                    ]
                }
            )
            if not tools
            else json.dumps(
                {
                    "tool": "update",
                    "upsert_character_state": [],
                    "add_future_requirement": [],
                    "add_past_event": [{"key": "Bad Key", "description": "x", "evidence": "x"}],
                    "resolve_future_requirement": [],
                }
            )
            if tools == ["update"]
            else json.dumps({"tool": "write", "title": "T"})
        ),
    )


def nst_requests(store, config, author: Author, **settings) -> list:
    loop = ChapterLoop(
        author,
        store,
        plan=Plan.of(PLAN),
        story_prompt="prompt",
        state=NarrativeState(),
        index=1,
        config=NstConfig.coerce({**config, **settings}),
        ratio=1.3,
    )
    loop.run()
    return author.requests


def magnet_requests(tmp_path) -> list:
    llm = StoryLLM()
    config = {**MagnetSettings().as_config(), "story": story(words=300).to_dict()}
    store = RunStore.create(tmp_path / "magnet", pipeline="magnet", config=config, unit_kind="step")
    with store.sessions.hold("start"):
        write_story(store, llm, config)
    store.close()
    return llm.requests


@pytest.mark.parametrize("max_turns", [3, 6])
def test_every_nst_request_alternates_roles_even_past_the_turn_cap(store, config, max_turns):
    requests = nst_requests(store, config, fallback_author(), max_turns=max_turns)
    fallbacks = [c for c in store.ledger.tool_calls() if c.arguments.get("fallback")]
    assert [c.tool for c in fallbacks] == ["invalid", "update"]  # both fallback asks were sent
    assert len(requests) > 5
    for request in requests:
        assert role_order_error(request.messages) is None, role_order_error(request.messages)


def test_every_magnet_request_alternates_roles(tmp_path):
    requests = magnet_requests(tmp_path)
    assert len(requests) > 10
    for request in requests:
        assert role_order_error(request.messages) is None, role_order_error(request.messages)


def test_two_user_turns_in_a_row_are_refused_before_they_reach_any_backend():
    llm = ScriptedLLM(["never sent"])
    with pytest.raises(ValueError, match="roles must alternate"):
        llm.generate(
            [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
            temperature=0,
            max_tokens=8,
        )
    assert llm.requests == []


def test_a_turn_after_one_of_the_same_role_joins_it():
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "a"}]
    add_turn(messages, "user", "b")
    add_turn(messages, "assistant", "c")
    add_turn(messages, "user", "d")
    assert messages == [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "a\n\nb"},
        {"role": "assistant", "content": "c"},
        {"role": "user", "content": "d"},
    ]
    assert role_order_error(messages) is None
    assert "message 1 is 'assistant'" in role_order_error(
        [{"role": "system", "content": "s"}, {"role": "assistant", "content": "x"}]
    )
