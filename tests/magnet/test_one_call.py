"""The paper's narrator and goal generator (Magnet §3.2): under ``paper`` one narrator call selects,
orders and writes the paragraph, and one goal call writes the new goal and the transition, seeing the
world state (``narrator_calls = 1``, ``goal_calls = 1``); the default keeps two calls each."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agent import pipelines
from agent.errors import ConfigError
from agent.llm.types import LLMError
from agent.magnet.loop import initial_state, run_step
from agent.magnet.settings import MagnetConfig, MagnetSettings
from agent.testing.story_llm import StoryLLM, character_of, default_critic
from tests.magnet.stories import story

PAPER = MagnetSettings.parse(MagnetSettings.profile_settings("paper"))
NEW_GOAL = ("complete", "stalled", "shift", "conclude")


def ann_completes_once(request: Any, n: int) -> dict[str, Any]:
    """Ann's third action completes the first goal (a ``complete`` goal event mid-story)."""
    return {**default_critic(request, n), "goal_reached": character_of(request) == "Ann" and n == 7}


def _store(tmp_path: Path, profile: str) -> Any:
    config = {"story": story(words=600).to_dict(), **MagnetConfig.profile_settings(profile)}
    llm = pipelines.LLMOptions(backend="scripted", model="scripted")
    return pipelines.start(tmp_path / profile, "magnet", config, llm, model=StoryLLM(critic=ann_completes_once))


def _ledger(tmp_path: Path, profile: str) -> tuple[Counter[str], list[dict[str, Any]], Any]:
    store = _store(tmp_path, profile)
    assert store.info().status == "completed"
    roles = Counter(c.role or "" for c in store.ledger.llm_calls())
    records = [s["record"] for s in store.steps()]
    return roles, records, store


@pytest.mark.parametrize(("profile", "narrator", "goal"), [("paper", 1, 1), ("default", 2, 2)])
def test_calls_per_step_counted_in_the_ledger(tmp_path: Path, profile: str, narrator: int, goal: int) -> None:
    roles, records, _ = _ledger(tmp_path, profile)
    steps = len(records)
    events = [r["goal_event"] for r in records if r["goal_event"] and r["goal_event"]["kind"] in NEW_GOAL]
    assert steps > 3 and {e["kind"] for e in events} >= {"complete", "conclude"}
    assert roles["narrator"] + roles["narrator-select"] == narrator * steps
    assert roles["goal"] + roles["transition"] == goal * len(events)
    if profile == "paper":
        assert not roles["narrator-select"] and not roles["transition"]


def test_the_paper_run_applies_the_one_calls_replies(tmp_path: Path) -> None:
    _, records, store = _ledger(tmp_path, "paper")
    calls = store.ledger.llm_calls()
    narrations = [c for c in calls if c.role == "narrator"]
    assert narrations and all(c.schema_name and c.max_tokens == PAPER.ceiling(80 + 320) for c in narrations)
    paragraphs = [p for p in store.paragraphs() if p.kind != "transition"]
    assert [p.text for p in paragraphs] == [json.loads(c.text or "")["paragraph"] for c in narrations]
    assert all(r["selected"] == ["Ann", "Bob", "Cy"] for r in records)  # the scripted narrator selects everyone
    goals = [c for c in calls if c.role == "goal"]
    assert goals and all(c.max_tokens == PAPER.ceiling(120 + 220) for c in goals)
    prompt = "\n\n".join(m["content"] for m in goals[0].messages)
    # Magnet §3.2: previous goal, recent paragraphs, world state, all personas, all prior goals
    for seen in ("Previous goal:", "Recent story paragraphs:", "World state", "Characters:", "Earlier goals"):
        assert seen in prompt, seen
    instructions, task = goals[0].messages[1]["content"].split("\n\n")[0], goals[0].messages[1]["content"]
    assert "transition paragraph" in instructions and task.endswith("Then write the transition paragraph.")
    transitions = [p.text for p in store.paragraphs() if p.kind == "transition"]
    assert transitions and all("the story turned" in t for t in transitions)


def test_the_default_transition_sees_no_world_state(tmp_path: Path) -> None:
    calls = _store(tmp_path, "default").ledger.llm_calls()
    transitions = [c for c in calls if c.role == "transition"]
    assert transitions and not any("World state" in m["content"] for c in transitions for m in c.messages)


def test_the_transition_reads_the_story_the_goal_call_read_first(tmp_path: Path) -> None:
    """#35: the goal generator and the transition read the story as their system message, the
    transition's a prefix of the goal's (all but the world state), so on a local engine the
    transition recomputes only its instructions; each role's instructions open its user turn."""
    calls = _store(tmp_path, "default").ledger.llm_calls()
    pairs = [(a, b) for a, b in itertools.pairwise(calls) if (a.role, b.role) == ("goal", "transition")]
    assert pairs
    for goal, transition in pairs:
        story_first = transition.messages[0]["content"]
        assert story_first.startswith("Title: ") and "Recent story paragraphs:" in story_first
        assert goal.messages[0]["content"].startswith(story_first + "\n\nWorld state")
        assert goal.messages[1]["content"].startswith("You plan the next story goal")
        assert transition.messages[1]["content"].startswith("You are the narrator of a story. Write a short transition")


def _step(llm: StoryLLM, settings: MagnetSettings = PAPER) -> Any:
    s = story(words=100_000)
    return run_step(llm, s, settings, initial_state(s, settings), 1, [])


def test_one_call_selection_and_paragraph_are_applied() -> None:
    llm = StoryLLM(
        narrator_select=lambda r, n: {"selected": ["Cy", "Ann", "Cy"], "rejected_updates": []},
        narrator=lambda r, n: "  Cy handed Ann the key.\n\n## Aside\nShe took it.  ",
    )
    out = _step(llm)
    assert len(llm.by_role("narrator")) == 1 and not llm.by_role("narrator-select")
    assert out.record["selected"] == ["Cy", "Ann"]  # in the narrator's order, the repeat dropped
    assert out.record["unselected"] == ["Bob"]
    assert [c["character"] for c in out.record["commits"]] == ["Cy", "Ann"]  # only the selected, in order
    assert out.paragraphs[0] == "Cy handed Ann the key. She took it."  # cleaned as a plain paragraph is


def test_an_empty_paragraph_in_the_one_call_is_asked_again() -> None:
    llm = StoryLLM(narrator=lambda r, n: "  \n" if n == 1 else "The door opened.")
    out = _step(llm)
    assert out.paragraphs[0] == "The door opened." and len(llm.by_role("narrator")) == 2


def test_a_failed_one_call_tells_the_first_action_alone() -> None:
    def fail(request: Any, n: int) -> LLMError | None:
        return LLMError("bad json") if request.role == "narrator" and request.constraint is not None else None

    llm = StoryLLM(fail=fail)
    out = _step(llm)
    assert out.record["selected"] == ["Ann"] and "told the first action alone (Ann)" in out.record["selection_fallback"]
    assert [f["role"] for f in out.record["failures"]] == ["narrator"]
    assert out.paragraphs[0].startswith("Rain fell")  # the plain paragraph call told it


def test_one_goal_call_carries_the_transition() -> None:
    def critic(request: Any, n: int) -> dict[str, Any]:
        return {**default_critic(request, n), "goal_reached": character_of(request) == "Ann"}

    llm = StoryLLM(critic=critic)
    out = _step(llm)
    assert out.record["goal_event"]["kind"] == "complete" and out.state["goal"] == "New goal number 1."
    assert out.paragraphs[1] == ("transition", "Then, at last, the story turned (transition 1).")
    assert len(llm.by_role("goal")) == 1 and not llm.by_role("transition")
    # the goal call sees the world state after this step's commit
    assert "acted = " in llm.by_role("goal")[0].messages[0]["content"]  # the world state after the step


def test_one_narrator_call_refuses_the_prose_floor() -> None:
    with pytest.raises(ConfigError, match=r"narrator_calls.*paragraph_floor=false"):
        MagnetSettings.parse({"narrator_calls": 1})
    assert MagnetSettings.parse({"narrator_calls": 1, "paragraph_floor": False}).narrator_calls == 1
    assert (MagnetSettings().narrator_calls, MagnetSettings().goal_calls) == (2, 2)  # the default unchanged


def test_the_repetition_guard_asks_the_one_call_again() -> None:
    """``--set narrator_calls=1`` under the default keeps its guard: a looping paragraph is asked once
    more (the whole reply, with the repeated passage quoted), and the less repetitive reply is kept."""
    loop = " ".join(["The bell rang over the water and the keeper counted the boats."] * 6)
    settings = MagnetSettings(narrator_calls=1, paragraph_floor=False)
    llm = StoryLLM(narrator=lambda r, n: loop if n == 1 else "Ann lit the lamp; Bob and Cy watched the tide.")
    out = _step(llm, settings)
    first, second = llm.by_role("narrator")
    assert second.messages[-2]["role"] == "assistant" and json.loads(second.messages[-2]["content"])["paragraph"]
    assert second.constraint is not None and second.constraint.json_schema == first.constraint.json_schema
    assert out.paragraphs[0] == "Ann lit the lamp; Bob and Cy watched the tide."


def test_one_call_with_vetting_rejects_updates() -> None:
    settings = MagnetSettings(narrator_calls=1, paragraph_floor=False)  # the default narrator vets updates
    llm = StoryLLM(narrator_select=lambda r, n: {"selected": ["Ann", "Bob"], "rejected_updates": ["u2"]})
    out = _step(llm, settings)
    schema = llm.by_role("narrator")[0].constraint.json_schema
    assert list(schema["properties"]) == ["selected", "rejected_updates", "paragraph"]
    assert [r["character"] for r in out.record["rejected_updates"]] == ["Bob"]
    assert [c["character"] for c in out.record["commits"]] == ["Ann"]  # Bob's only update was rejected
