"""Scripted timesteps over the (subject, attribute) state: the critic's grammar, spellings that
must never create a second variable, secrets, the narrator's informed selection and its
fallback, personas from the state, failures in the step record, each role's temperature."""

from __future__ import annotations

import json
import re

from agent.llm.types import LLMError
from agent.magnet import prompts
from agent.magnet.loop import initial_state, run_step
from agent.magnet.settings import MagnetSettings
from agent.magnet.world import WorldGraph
from agent.testing.story_llm import StoryLLM, character_of, offered, schema_of, story_dict
from tests.magnet.stories import story

FAR = {"words": 100_000}


def _story(**over):
    return story(**FAR, **over)


def _steps(llm, n, settings=None, s=None):
    s = s or _story()
    settings = settings or MagnetSettings()
    state = initial_state(s, settings)
    outs = []
    for step in range(1, n + 1):
        out = run_step(llm, s, settings, state, step, [])
        state = out.state
        outs.append(out)
    return outs


def test_the_critic_grammar_offers_the_storys_subjects_and_any_snake_case_attribute():
    """Existing attributes are snake_case, so the new-attribute pattern already spells them and the
    grammar lists none by name (the language, checked in tests/magnet/test_update_grammar.py)."""
    llm = StoryLLM()
    _steps(llm, 2)
    first, later = (offered(r) for r in (llm.by_role("critic")[0], llm.by_role("critic")[-1]))
    assert first == later == {subject: [] for subject in ("world", "Ann", "Bob", "Cy")}


def test_the_critic_prompt_example_is_valid_under_the_grammar():
    llm = StoryLLM()
    _steps(llm, 1)
    request = llm.by_role("critic")[0]
    examples = [json.loads(m) for m in re.findall(r'\{"subject": [^}]*\}', prompts.CRITIC_SYSTEM)]
    assert examples
    reply = {
        "verdict": "accept",
        "feedback": "ok",
        "goal_reached": False,
        "world_updates": [{**e, "subject": "Ann"} for e in examples],
    }
    request.output_type.model_validate(reply)


def test_the_small_profile_shows_the_critic_one_complete_reply_valid_under_its_grammar():
    llm = StoryLLM()
    _steps(llm, 1, MagnetSettings.parse(MagnetSettings.profile_settings("small")))
    request = llm.by_role("critic")[0]
    instructions = request.messages[1]["content"].split("\n\n")[0]  # the story is the system message
    assert instructions.startswith("You are the critic") and instructions.endswith(prompts.CRITIC_EXAMPLE)
    example = json.loads(prompts.CRITIC_EXAMPLE.partition(": ")[2])
    example["world_updates"] = [{**u, "subject": "Ann"} for u in example["world_updates"]]
    request.output_type.model_validate(example)
    stateless = StoryLLM()
    _steps(stateless, 1, MagnetSettings.parse({**MagnetSettings.profile_settings("small"), "structured_state": False}))
    request = stateless.by_role("critic")[0]
    assert request.messages[1]["content"].split("\n\n")[0].endswith(prompts.CRITIC_STATELESS_EXAMPLE)
    request.output_type.model_validate(json.loads(prompts.CRITIC_STATELESS_EXAMPLE.partition(": ")[2]))
    plain = StoryLLM()
    _steps(plain, 1)
    assert not any("A complete reply" in m["content"] for m in plain.by_role("critic")[0].messages)  # the paper's


def test_critic_spellings_never_create_a_second_variable():
    spellings = [
        [{"subject": "Ann", "attribute": "holding_back_evidence", "value": "false"}],  # unprefixed
        [{"subject": "Ann", "attribute": "ann_holding_back_evidence", "value": "true"}],  # prefixed (new slot)
        [{"subject": "world", "attribute": "ann_holding_back_evidence", "value": "false"}],  # under the world
        [{"subject": "Ann", "attribute": "bob_location", "value": "the cellar"}],  # another character's
        [{"subject": "Bob", "attribute": "location", "value": "the attic"}],
    ]

    ann_reviews = iter(spellings)

    def critic(request, n):
        updates = next(ann_reviews) if character_of(request) == "Ann" else []
        return {"verdict": "accept", "feedback": "ok", "world_updates": updates, "goal_reached": False}

    s = _story()
    initial = WorldGraph.from_definition(s).pairs()
    outs = _steps(StoryLLM(critic=critic), len(spellings), s=s)
    for out in outs:
        world = WorldGraph.from_json(out.state["world"])
        assert len(set(world.pairs())) == len(world.pairs()) == len(initial)
    final = WorldGraph.from_json(outs[-1].state["world"])
    assert final.value("Ann", "holding_back_evidence") is False and final.location("Bob") == "the attic"
    moved = outs[3].record["commits"][0]
    assert (moved["subject"], moved["attribute"], moved["new"]) == ("Bob", "location", "the cellar")


def test_a_differently_cased_key_without_a_critic_lands_on_the_same_variable():
    def action(request, n):
        name = character_of(request)
        ups = [{"subject": "Ann", "attribute": "holding_back_evidence", "value": "false"}] if name == "Ann" else []
        return {"action": f"{name} moves.", "world_updates": ups, "goal_reached": False}

    s = _story()
    [out] = _steps(StoryLLM(character=action), 1, MagnetSettings(critic=False), s)
    world = WorldGraph.from_json(out.state["world"])
    assert world.pairs() == WorldGraph.from_definition(s).pairs()
    # a legacy-looking, differently cased spelling (as an older run or another caller might hold)
    from agent.magnet.world import Update

    world.apply(2, 0, "Ann", "x", [Update("ANN", "Holding-Back-Evidence", "true")])
    assert world.pairs() == WorldGraph.from_definition(s).pairs()


def _secret_story():
    chars = story_dict()["characters"]
    chars[1]["secrets"] = {"in_debt": "owes forty thousand to Vance"}
    chars[0]["secrets"] = {"hid_the_codicil": "under the floorboard"}
    return story(**FAR, characters=chars, secrets={"true_heir": "the gardener"})


def test_no_character_request_holds_another_characters_secret():
    llm = StoryLLM()
    _steps(llm, 2, s=_secret_story())
    for request in llm.by_role("character"):
        text = json.dumps(request.messages)
        who = character_of(request)
        assert "the gardener" not in text
        assert ("forty thousand" in text) == (who == "Bob")
        assert ("floorboard" in text) == (who == "Ann")
    critic = json.dumps(llm.by_role("critic")[0].messages)
    assert "forty thousand" in critic and "the gardener" in critic and "(secret)" in critic


def test_the_narrator_selects_with_updates_and_goal_flags_in_view_and_may_reject_one():
    def critic(request, n):
        who = character_of(request)
        value = {"Ann": "open", "Bob": "locked", "Cy": "ajar"}[who]
        return {
            "verdict": "accept",
            "feedback": "ok",
            "goal_reached": who == "Cy",
            "world_updates": [{"subject": "world", "attribute": "door", "value": value}],
        }

    def select(request, n):
        text = request.messages[1]["content"]
        assert '[u1] world.door = "open"' in text and '[u2] world.door = "locked"' in text
        assert "completes the current goal: yes" in text and "completes the current goal: no" in text
        assert request.output_type.model_json_schema()["properties"]["rejected_updates"]["items"]["enum"] == [
            "u1",
            "u2",
            "u3",
        ]
        return {"selected": ["Ann", "Bob"], "rejected_updates": ["u2"]}

    [out] = _steps(StoryLLM(critic=critic, narrator_select=select), 1)
    assert [(c["character"], c["new"]) for c in out.record["commits"]] == [("Ann", "open")]
    assert out.record["rejected_updates"] == [
        {"id": "u2", "character": "Bob", "subject": "world", "attribute": "door", "value": "locked"}
    ]


def test_a_failed_selection_is_retried_then_falls_back_to_the_first_action_alone():
    llm = StoryLLM(fail=lambda r, n: LLMError("bad json") if r.role == "narrator-select" else None)
    [out] = _steps(llm, 1, MagnetSettings(retries=2))
    assert len(llm.by_role("narrator-select")) == 3  # the call and two re-asks
    assert out.record["selected"] == ["Ann"] and out.record["unselected"] == ["Bob", "Cy"]
    assert [c["character"] for c in out.record["commits"]] == ["Ann"]
    assert "kept the first action alone (Ann)" in out.record["selection_fallback"]
    assert {
        "role": "narrator-select",
        "character": None,
        "error": "bad json",
        "outcome": out.record["selection_fallback"],
    } in out.record["failures"]
    # retried successfully: no fallback
    llm = StoryLLM(fail=lambda r, n: LLMError("bad json") if r.role == "narrator-select" and n == 1 else None)
    [out] = _steps(llm, 1, MagnetSettings(retries=1))
    assert out.record["selected"] == ["Ann", "Bob", "Cy"] and out.record["selection_fallback"] is None


def test_failed_character_critic_and_goal_calls_are_in_the_step_record():
    def fail(request, n):
        if request.role == "character" and "Your character is Bob." in request.messages[1]["content"]:
            return LLMError("timeout")
        if request.role == "critic" and character_of(request) == "Cy":
            return LLMError("invalid reply")
        if request.role == "goal":
            return LLMError("server gone")
        return None

    def critic(request, n):
        return {"verdict": "accept", "feedback": "ok", "goal_reached": True, "world_updates": []}

    [out] = _steps(StoryLLM(fail=fail, critic=critic), 1, MagnetSettings(retries=0))
    failures = {(f["role"], f["character"]) for f in out.record["failures"]}
    assert failures == {("character", "Bob"), ("critic", "Cy"), ("goal", None)}
    assert out.record["sat_out"] == ["Bob"]
    assert out.record["goal_event"]["kind"] == "failed" and out.state["goal"] == "Find the codicil."


def test_role_prompts_draw_location_and_relationships_from_the_state():
    def critic(request, n):
        ups = (
            [
                {"subject": "Ann", "attribute": "location", "value": "the boathouse"},
                {"subject": "Ann", "attribute": "relationship_with_bob", "value": "bitter rival"},
            ]
            if character_of(request) == "Ann"
            else []
        )
        return {"verdict": "accept", "feedback": "ok", "goal_reached": False, "world_updates": ups}

    llm = StoryLLM(critic=critic)
    _steps(llm, 2)
    step2 = [r for r in llm.by_role("character") if "Your character is Ann." in r.messages[1]["content"]][-1]
    persona = step2.messages[1]["content"].split("Your character:\n")[1]
    assert "Location: the boathouse" in persona and "Bob: bitter rival" in persona
    assert "Location: library" not in persona
    narrator = llm.by_role("narrator")[-1].messages[0]["content"]  # the story: the system message
    assert "Location: the boathouse" in narrator


def test_each_role_has_its_temperature():
    def critic(request, n):
        return {"verdict": "accept", "feedback": "ok", "world_updates": [], "goal_reached": True}

    settings = MagnetSettings(
        character_temperature=0.21, critic_temperature=0.11, narrator_temperature=0.36, goal_temperature=0.12
    )
    llm = StoryLLM(critic=critic)
    _steps(llm, 1, settings)
    temps = {r.role: {q.temperature for q in llm.by_role(r.role)} for r in llm.requests}
    assert temps == {
        "character": {0.21},
        "critic": {0.11},
        "narrator-select": {0.36},
        "narrator": {0.36},
        "goal": {0.12},
        "transition": {0.12},
    }
    # the paper's defaults
    d = MagnetSettings()
    assert (d.character_temperature, d.critic_temperature, d.narrator_temperature, d.goal_temperature) == (
        0.2,
        0.1,
        0.35,
        0.1,
    )


def test_secrets_quoted_by_the_all_seeing_roles_are_hidden_from_other_characters():
    def critic(request, n):
        reply = {"world_updates": [], "goal_reached": n == 4}
        if "verdict" in request.constraint.json_schema["properties"]:
            reply.update(verdict="revise", feedback="Bob OWES FORTY THOUSAND to Vance; use it.")
        return reply

    llm = StoryLLM(critic=critic, goal=lambda r, n: {"goal": "Prove that Bob owes forty thousand to Vance."})
    _steps(llm, 2, MagnetSettings(max_revisions=1), s=_secret_story())
    revisions = [r for r in llm.by_role("character") if len(r.messages) > 2]
    assert revisions
    for request in llm.by_role("character"):
        text = json.dumps(request.messages).lower()
        assert ("forty thousand" in text) == (character_of(request) == "Bob"), character_of(request)
    later = [r for r in llm.by_role("character") if "Prove that" in r.messages[1]["content"]]
    assert later and any("Prove that Bob [hidden]." in r.messages[1]["content"] for r in later)


def test_without_a_critic_a_characters_grammar_never_names_anothers_secret_attribute():
    """Attributes are any snake_case name, so no grammar lists a secret's name; an enum of the
    viewer's attributes once did, and had to leave the others' secrets out by hand."""
    llm = StoryLLM(character=lambda r, n: {"action": "x.", "world_updates": [], "goal_reached": False})
    _steps(llm, 1, MagnetSettings(critic=False), s=_secret_story())
    grammars = {character_of(r): json.dumps(schema_of(r)) for r in llm.by_role("character")}
    assert set(grammars) == {"Ann", "Bob", "Cy"}
    assert not any("in_debt" in g or "true_heir" in g or "has_the_letter" in g for g in grammars.values())
    assert all(offered(r) == {s: [] for s in ("world", "Ann", "Bob", "Cy")} for r in llm.by_role("character"))


def test_the_characters_of_a_step_share_the_story_and_the_public_state_before_their_personas():
    """The story so far and the public world state (in story order, the same for every viewer) come
    before each persona, and a character's own secrets after it, so a step's character requests
    share them as a prompt prefix (the KV cache computes it once, not once per character)."""
    s = _secret_story()
    world = WorldGraph.from_definition(s)
    recent = ["Rain fell on the old house while the keeper counted the lanterns. Paragraph 1."]
    first, *others = (
        prompts.character(s, c, "Find the codicil.", recent, world, "", with_effects=False)[1]["content"]
        for c in s.characters
    )
    same = next((i for i, chars in enumerate(zip(first, *others, strict=False)) if len(set(chars)) > 1), len(first))
    shared = first[:same]
    assert len(others) == 2 and "Recent story paragraphs:" in shared and "Paragraph 1." in shared
    # the three see the world's variables alike; then Bob, who relates to no one, sees only his own
    assert shared.endswith("\n\nWorld state (subject: attribute = value):\nworld:\n  codicil_missing = true\n")
    ann, _, cy = first, *others
    both = ann[: next(i for i, (a, c) in enumerate(zip(ann, cy, strict=False)) if a != c)]
    assert both.endswith('  relationship_with_bob = "cousin"\n  holding_back_evidence = true\n')  # Ann's public state
    assert "(your secret)" not in ann.split("Your character:")[0]
    secrets = ann.split("Your secrets (subject: attribute = value):\n")[1]
    assert secrets.startswith('Ann:\n  hid_the_codicil = "under the floorboard"  (your secret)\n\nCurrent story goal:')
    assert "Your secrets" not in cy and "floorboard" not in cy
