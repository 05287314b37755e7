"""One timestep with scripted replies: revision loop, commit semantics, goal sequencing."""

from __future__ import annotations

import pytest

from agent.magnet.loop import initial_state, run_step, sequence_goal
from agent.magnet.roles import Scene
from agent.magnet.settings import MagnetSettings
from agent.testing.story_llm import StoryLLM, character_of, default_critic
from tests.magnet.stories import story

FAR = {"words": 100_000}  # far from the ending, so only goal sequencing acts


def _solo():
    from agent.testing.story_llm import story_dict

    ann = story_dict()["characters"][0]
    return [{**ann, "relationships": {}}]


def _run(llm, settings=None, step=1, state=None, **over):
    s = story(**FAR, **over)
    settings = settings or MagnetSettings()
    return run_step(llm, s, settings, state or initial_state(s, settings), step, [])


def test_critic_revision_loop_stops_at_the_maximum():
    def critic(request, n):
        reply = default_critic(request, n)
        if "verdict" in reply:
            reply.update(verdict="revise", feedback="Too vague.")
        return reply

    llm = StoryLLM(critic=critic)
    out = _run(llm, MagnetSettings(max_revisions=2), characters=_solo())
    # one action + 2 revisions; 3 reviews, the last offering no "revise" (effects only)
    assert len(llm.by_role("character")) == 3
    reviews = llm.by_role("critic")
    assert len(reviews) == 3
    assert ["verdict" in r.constraint.json_schema["properties"] for r in reviews] == [True, True, False]
    action = out.record["actions"][0]
    assert action["revisions"] == 2 and action["capped"] is True
    assert [a["verdict"] for a in action["attempts"]] == ["revise", "revise", "final"]
    # the revision request carries the earlier attempt and the feedback, after the unchanged prefix
    revised = llm.by_role("character")[1].messages
    assert revised[:2] == llm.by_role("character")[0].messages[:2]
    assert "Too vague." in revised[-1]["content"]
    assert out.record["commits"]  # the capped action's effects still land once selected


def test_accept_ends_the_loop_early():
    def critic(request, n):
        reply = default_critic(request, n)
        reply.update(verdict="revise" if n == 1 else "accept", feedback="x")
        return reply

    llm = StoryLLM(critic=critic)
    out = _run(llm, characters=_solo())
    assert len(llm.by_role("character")) == 2
    assert out.record["actions"][0]["capped"] is False
    assert out.record["actions"][0]["revisions"] == 1


def test_characters_are_asked_together_each_round():
    calls = []

    class Recording(StoryLLM):
        def _run_many(self, requests):
            calls.append([r.role for r in requests])
            return super()._run_many(requests)

    _run(Recording())
    assert calls[0] == ["character"] * 3 and calls[1] == ["critic"] * 3


def test_only_selected_actions_commit_in_narrator_order():
    updates = {
        "Ann": [
            {"subject": "world", "attribute": "door", "value": "open"},
            {"subject": "Ann", "attribute": "mood", "value": "calm"},
        ],
        "Bob": [{"subject": "world", "attribute": "bob_hidden", "value": "true"}],
        "Cy": [
            {"subject": "world", "attribute": "door", "value": "locked"},
            {"subject": "world", "attribute": "codicil_missing", "value": "false"},
        ],
    }

    def critic(request, n):
        return {
            "verdict": "accept",
            "feedback": "ok",
            "world_updates": updates[character_of(request)],
            "goal_reached": character_of(request) == "Bob",
        }

    llm = StoryLLM(
        critic=critic, narrator_select=lambda r, n: {"selected": ["Cy", "Ann", "Cy"], "rejected_updates": []}
    )
    out = _run(llm)
    world = out.state["world"]["variables"]
    assert out.record["selected"] == ["Cy", "Ann"]  # the repeat is dropped
    assert out.record["unselected"] == ["Bob"]
    assert world["world"]["door"]["value"] == "open"  # Ann's write comes after Cy's and overwrites it
    assert world["world"]["codicil_missing"]["value"] is False  # existing variable overwritten
    assert world["Ann"]["mood"]["value"] == "calm"  # new variable inserted
    assert "bob_hidden" not in world["world"] and "hidden" not in world["Bob"]  # unselected: never lands
    assert out.record["goal_reached"] is False  # only Bob (unselected) claimed the goal
    assert [(c["character"], c["subject"], c["attribute"]) for c in out.record["commits"]] == [
        ("Cy", "world", "door"),
        ("Cy", "world", "codicil_missing"),
        ("Ann", "world", "door"),
        ("Ann", "Ann", "mood"),
    ]
    # the narrator is told the selected actions in its order
    told = llm.by_role("narrator")[0].messages[1]["content"]
    assert told.index("1. Cy:") < told.index("2. Ann:") and "Bob acts" not in told.split("Actions to tell")[1]


def test_a_variable_written_twice_in_one_reply_commits_once_with_the_later_value():
    """A small model may name one variable twice in a reply (CI saw two commits for one change)."""
    twice = [
        {"subject": "world", "attribute": "door", "value": "open"},
        {"subject": "world", "attribute": "door", "value": "ajar"},
        {"subject": "Ann", "attribute": "ann_mood", "value": "calm"},
        {"subject": "Ann", "attribute": "mood", "value": "tense"},
    ]

    def critic(request, n):
        return {
            "verdict": "accept",
            "feedback": "ok",
            "world_updates": twice if character_of(request) == "Ann" else [],
            "goal_reached": False,
        }

    llm = StoryLLM(critic=critic, narrator_select=lambda r, n: {"selected": ["Ann"], "rejected_updates": []})
    out = _run(llm)
    commits = [(c["character"], c["subject"], c["attribute"], c["new"]) for c in out.record["commits"]]
    assert commits == [("Ann", "world", "door", "ajar"), ("Ann", "Ann", "mood", "tense")]
    ann = next(a for a in out.record["actions"] if a["character"] == "Ann")
    assert [u["value"] for u in ann["updates"]] == ["ajar", "tense"]


def test_goal_completed_by_a_selected_action_brings_the_next_goal_and_transition():
    def critic(request, n):
        return {**default_critic(request, n), "goal_reached": character_of(request) == "Ann"}

    llm = StoryLLM(critic=critic)
    out = _run(llm)
    assert out.record["goal_event"]["kind"] == "complete"
    assert out.state["goal"] == "New goal number 1."
    assert [g["reason"] for g in out.state["goals"]] == ["initial", "complete"]
    assert out.paragraphs[1][0] == "transition" and "transition 1" in out.paragraphs[1][1]
    prompt = "\n\n".join(m["content"] for m in llm.by_role("goal")[0].messages)
    assert "Find the codicil." in prompt and "Earlier goals" in prompt and "Characters:" in prompt


def _sequence(step, stall, reached, settings=None):
    s = story(**FAR)
    settings = settings or MagnetSettings()
    state = initial_state(s, settings)
    state["stall"] = stall
    llm = StoryLLM()
    event = sequence_goal(llm, s, settings, state, step, reached, Scene(s, None, state["goal"], []), ["p"])
    return event, state


@pytest.mark.parametrize(
    "step,stall,reached,kind",
    [
        (40, 15, True, "shift"),  # 40-step shift beats a stall and a completion
        (80, 0, False, "shift"),
        (41, 15, True, "stalled"),  # a stall beats a completion
        (41, 16, False, "stalled"),
        (7, 3, True, "complete"),
    ],
)
def test_goal_sequencing_precedence(step, stall, reached, kind):
    event, state = _sequence(step, stall, reached)
    assert event["kind"] == kind
    assert state["stall"] == 0
    assert state["goals"][-1]["reason"] == kind


def test_stall_counter_counts_steps_without_completion():
    event, state = _sequence(7, 14, False)
    assert event is None and state["stall"] == 15
    event, state = _sequence(7, 15, False)
    assert event["kind"] == "stalled"


def test_thresholds_are_settings():
    event, _ = _sequence(10, 2, False, MagnetSettings(shift_every=5))
    assert event["kind"] == "shift"
    event, _ = _sequence(11, 2, False, MagnetSettings(stall_steps=2))
    assert event["kind"] == "stalled"


def test_an_empty_paragraph_is_asked_again_then_fails_the_step():
    from agent.llm.types import LLMError

    llm = StoryLLM(narrator=lambda r, n: "" if n == 1 else "The door opened.")
    out = _run(llm)
    assert out.paragraphs[0] == "The door opened."
    with pytest.raises(LLMError, match="empty paragraph 2 times"):
        _run(StoryLLM(narrator=lambda r, n: "  \n"))
