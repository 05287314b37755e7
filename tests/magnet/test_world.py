"""The world graph: (subject, attribute) addressing, views and secrets, the commit rule, export,
and reading state written before subjects existed."""

from __future__ import annotations

from agent.magnet.world import Update, WorldGraph, coerce
from agent.testing.story_llm import story_dict
from tests.magnet.stories import story


def _secret_story():
    chars = story_dict()["characters"]
    chars[1]["secrets"] = {"in_debt": "owes 40,000 to a bookmaker"}
    chars[0]["secrets"] = {"has_the_letter": True}
    return story(characters=chars, secrets={"true_heir": "Cy"})


def test_initial_graph_is_per_subject():
    world = WorldGraph.from_definition(story())
    assert world.value("world", "codicil_missing") is True
    assert world.value("Ann", "holding_back_evidence") is True
    assert world.location("Bob") == "hall"
    assert world.relationships("Ann") == {"Bob": "cousin"}
    assert world.relationships("Bob") == {}
    # Ann relates to Bob: she sees world, her own and Bob's variables, not Cy's.
    assert {(e.subject, e.attribute) for e in world.entries("Ann")} == {
        ("world", "codicil_missing"),
        ("Ann", "location"),
        ("Ann", "relationship_with_bob"),
        ("Ann", "holding_back_evidence"),
        ("Bob", "location"),
    }
    # Bob relates to nobody: world and his own.
    assert {(e.subject, e.attribute) for e in world.entries("Bob")} == {
        ("world", "codicil_missing"),
        ("Bob", "location"),
    }


def test_secrets_are_seen_by_their_owner_and_the_all_seeing_roles_only():
    world = WorldGraph.from_definition(_secret_story())
    ann = {(e.subject, e.attribute): e for e in world.entries("Ann")}
    assert ann[("Ann", "has_the_letter")].secret  # her own secret
    assert ("Bob", "in_debt") not in ann  # Bob's secret, though she relates to Bob
    assert ("world", "true_heir") not in ann  # a hidden world variable
    assert ("Bob", "location") in ann  # Bob's public variable
    everything = {(e.subject, e.attribute) for e in world.entries(None)}
    assert {("Bob", "in_debt"), ("world", "true_heir"), ("Ann", "has_the_letter")} <= everything
    # an update on a secret keeps it secret
    [commit] = world.apply(2, 0, "Cy", "Cy audits Bob.", [Update("Bob", "in_debt", "paid off")])
    assert commit.secret and world.variables["Bob"]["in_debt"]["secret"]
    assert ("Bob", "in_debt") not in {(e.subject, e.attribute) for e in world.entries("Ann")}


def test_any_spelling_of_a_variable_hits_the_same_one():
    world = WorldGraph.from_definition(story())
    pairs_before = world.pairs()
    before = len(pairs_before)
    world.apply(
        3,
        0,
        "Ann",
        "a",
        [
            Update("Ann", "holding_back_evidence", "false"),  # unprefixed
            Update("ann", "Holding_Back_Evidence", "true"),  # subject and attribute differently cased
            Update("Ann", "ann_holding_back_evidence", "false"),  # the old prefixed spelling
            Update("world", "bob_location", "the cellar"),  # another character's key, under the world
            Update("Ann", "Bob Location", "the attic"),  # ... and under Ann, with spaces
            Update("Ann", "ann_ann_holding_back_evidence", "false"),  # a doubled prefix
        ],
    )
    assert len(world.pairs()) == before  # every spelling landed on an existing variable
    assert sorted(world.pairs()) == sorted(pairs_before)
    assert not [pair for pair in world.pairs() if pair[1].startswith(pair[0].lower() + "_")]  # no prefixed twin
    assert world.value("Ann", "holding_back_evidence") is False
    assert world.location("Bob") == "the attic"


def test_apply_overwrites_and_inserts_and_records():
    world = WorldGraph.from_definition(story())
    commits = world.apply(
        3,
        0,
        "Ann",
        "Ann shows the letter.",
        [
            Update("Ann", "holding_back_evidence", "false"),
            Update("Ann", "has_disclosed_letter", "true"),
            Update("Nobody", "letter_pages", "2"),
            Update("Ann", "relationship_with_cy", "ally"),
        ],
    )
    assert world.value("Ann", "holding_back_evidence") is False
    assert world.value("Ann", "has_disclosed_letter") is True
    assert world.value("world", "letter_pages") == 2  # unknown subject falls back to the world
    assert world.relationships("Ann") == {"Bob": "cousin", "Cy": "ally"}  # relationships are state
    assert ("Cy", "location") in {(e.subject, e.attribute) for e in world.entries("Ann")}
    assert [(c.subject, c.attribute, c.old, c.new) for c in commits] == [
        ("Ann", "holding_back_evidence", True, False),
        ("Ann", "has_disclosed_letter", None, True),
        ("world", "letter_pages", None, 2),
        ("Ann", "relationship_with_cy", None, "ally"),
    ]
    assert world.variables["Ann"]["has_disclosed_letter"] == {"value": True, "step": 3, "by": "Ann", "secret": False}


def test_json_round_trip_and_export():
    world = WorldGraph.from_definition(_secret_story())
    again = WorldGraph.from_json(world.to_json())
    assert again.to_json() == world.to_json()
    graph = world.nodes_and_edges()
    kinds = {n["kind"] for n in graph["nodes"]}
    assert kinds == {"world", "character", "variable"}
    assert {"from": "character:Ann", "to": "character:Bob", "kind": "relationship", "label": "cousin"} in graph["edges"]
    node = next(n for n in graph["nodes"] if n["id"] == "variable:Bob/in_debt")
    assert node["subject"] == "Bob" and node["attribute"] == "in_debt" and node["secret"] is True


def test_a_world_written_before_subjects_is_read_and_converted():
    legacy = {
        "title": "T",
        "characters": {"Ann": "niece", "Bob": "son"},
        "relationships": [{"from": "Ann", "to": "Bob", "label": "cousin"}],
        "variables": {
            "codicil_missing": {"value": True, "concerns": "world", "step": 0, "by": None},
            "ann_location": {"value": "library", "concerns": "Ann", "step": 0, "by": None},
            "ann_holding_back_evidence": {"value": True, "concerns": "Ann", "step": 0, "by": None},
            "holding_back_evidence": {"value": False, "concerns": "Ann", "step": 4, "by": "Ann"},
            "bob_location": {"value": "hall", "concerns": "Bob", "step": 0, "by": None},
        },
    }
    world = WorldGraph.from_json(legacy)
    # the old duplicate (prefixed and unprefixed) collapses into one variable; the later write wins
    assert world.value("Ann", "holding_back_evidence") is False
    assert world.location("Ann") == "library" and world.relationships("Ann") == {"Bob": "cousin"}
    expected = [
        ("Ann", "holding_back_evidence"),
        ("Ann", "location"),
        ("Ann", "relationship_with_bob"),
        ("Bob", "location"),
        ("world", "codicil_missing"),
    ]
    assert sorted(world.pairs()) == expected


def test_coerce():
    assert coerce("TRUE") is True and coerce(" false ") is False
    assert coerce("42") == 42 and coerce("4.2") == "4.2" and coerce("in the hall") == "in the hall"


def test_the_two_example_genres_that_leaked_keep_their_secrets():
    from pathlib import Path

    from agent.magnet.definition import load_definition

    examples = Path(__file__).resolve().parents[2] / "agent" / "magnet" / "examples"
    museum = WorldGraph.from_definition(load_definition(examples / "thriller_museum.toml"))
    assert "Julian Reyes" in museum.related("Nadia Osei")
    seen = {(e.subject, e.attribute) for e in museum.entries("Nadia Osei")}
    assert ("Julian Reyes", "is_the_insider") not in seen and ("Julian Reyes", "has_vitrine_key") in seen
    assert ("world", "getaway") not in seen
    mystery = WorldGraph.from_definition(load_definition(examples / "mystery_codicil.toml"))
    assert "Hugo Ashcombe" in mystery.related("Lucia Ashcombe")
    seen = {(e.subject, e.attribute) for e in mystery.entries("Lucia Ashcombe")}
    assert ("Hugo Ashcombe", "in_debt") not in seen and ("Lucia Ashcombe", "holding_back_evidence") in seen


def test_redaction_hides_other_characters_secret_values_but_never_a_name():
    chars = story_dict()["characters"]
    chars[1]["secrets"] = {"in_debt": "owes 40,000 to a bookmaker"}
    chars[2]["name"] = "Cyril"
    world = WorldGraph.from_definition(story(characters=chars, secrets={"true_heir": "the gardener"}))
    text = "Ann heard that Bob OWES 40,000 to a moneylender; Cyril is the true heir."
    assert world.redact(text, "Ann") == text  # the exact value only
    world.apply(2, 0, "Cyril", "x", [Update("Bob", "in_debt", "owes 40,000"), Update("world", "true_heir", "Cyril")])
    assert world.redact(text, "Ann") == "Ann heard that Bob [hidden] to a moneylender; Cyril is the true heir."
    assert world.redact(text, "Bob") == text  # his own secret
