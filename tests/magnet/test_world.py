"""The world graph: views per character, the overwrite/insert commit rule, export."""

from __future__ import annotations

from agent.magnet.world import Update, WorldGraph, coerce
from tests.magnet.story_llm import story


def test_initial_graph_and_views():
    world = WorldGraph.from_definition(story())
    flat = world.flat()
    assert flat["codicil_missing"] is True
    assert flat["ann_holding_back_evidence"] is True
    assert flat["bob_location"] == "hall"
    # Ann relates to Bob: she sees world, her own and Bob's variables, not Cy's.
    assert set(world.view("Ann")) == {"codicil_missing", "ann_location", "ann_holding_back_evidence", "bob_location"}
    # Bob relates to nobody: world and his own.
    assert set(world.view("Bob")) == {"codicil_missing", "bob_location"}


def test_apply_overwrites_and_inserts_and_records():
    world = WorldGraph.from_definition(story())
    commits = world.apply(3, 0, "Ann", "Ann shows the letter.", [
        Update("Ann", "ann_holding_back_evidence", "false"),
        Update("Ann", "ann_has_disclosed_letter", "true"),
        Update("Nobody", "letter_pages", "2"),
    ])
    flat = world.flat()
    assert flat["ann_holding_back_evidence"] is False
    assert flat["ann_has_disclosed_letter"] is True
    assert flat["letter_pages"] == 2
    assert world.variables["letter_pages"]["concerns"] == "world"  # unknown subject falls back to the world
    assert [(c.key, c.old, c.new) for c in commits] == [
        ("ann_holding_back_evidence", True, False), ("ann_has_disclosed_letter", None, True),
        ("letter_pages", None, 2)]
    assert world.variables["ann_has_disclosed_letter"] == {"value": True, "concerns": "Ann", "step": 3, "by": "Ann"}


def test_json_round_trip_and_export():
    world = WorldGraph.from_definition(story())
    again = WorldGraph.from_json(world.to_json())
    assert again.flat() == world.flat()
    graph = world.nodes_and_edges()
    kinds = {n["kind"] for n in graph["nodes"]}
    assert kinds == {"world", "character", "variable"}
    assert {"from": "character:Ann", "to": "character:Bob", "kind": "relationship", "label": "cousin"} in graph["edges"]


def test_coerce():
    assert coerce("TRUE") is True and coerce(" false ") is False
    assert coerce("42") == 42 and coerce("4.2") == "4.2" and coerce("in the hall") == "in the hall"
