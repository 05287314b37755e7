"""The world update's grammar (``agent.magnet.schemas``): subjects from the story, attributes from
the subject's own or a new snake_case name, in as few shapes as that language needs (#35: the
museum critic's index compiled in 1.7 s with a shape per subject, 0.27 s merged)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from agent.llm.constraints import to_constraint
from agent.llm.local_decoding import constraint_regex
from agent.magnet.definition import load_definition
from agent.magnet.schemas import catalogue, critic_type
from agent.magnet.settings import MagnetSettings
from agent.magnet.world import WorldGraph

EXAMPLES = Path(__file__).resolve().parents[2] / "agent" / "magnet" / "examples"


def _review(*updates: tuple[str, str]) -> str:
    """A compact critic review, as the embedded engines decode it."""
    rows = [{"subject": s, "attribute": a, "value": "x"} for s, a in updates]
    return json.dumps(
        {"verdict": "accept", "feedback": "ok", "world_updates": rows, "goal_reached": False}, separators=(",", ":")
    )


def _accepts(regex: str, text: str) -> bool:
    return re.fullmatch(regex, text) is not None


def test_a_story_of_snake_case_attributes_gets_one_update_shape_with_the_same_language():
    world = WorldGraph.from_definition(load_definition(EXAMPLES / "thriller_museum.toml"))
    offer = catalogue(world)
    grammar = critic_type(MagnetSettings(), offer, final=False)
    regex = constraint_regex(to_constraint(grammar))
    assert regex.count('"subject"') == 2  # one shape, for the first update and the ones after it
    for subject, attributes in offer:
        for attribute in (*attributes, "a_new_one"):
            assert _accepts(regex, _review((subject, attribute))), (subject, attribute)
    assert _accepts(regex, _review(("Nadia Osei", "location"), ("world", "getaway"), ("Julian Reyes", "x1")))
    assert not _accepts(regex, _review(("Nobody", "location")))  # subjects stay the story's
    assert not _accepts(regex, _review(("world", "Not Snake")))
    assert not _accepts(regex, _review(*[("world", "getaway")] * 5))  # at most four updates


def test_an_attribute_outside_the_pattern_is_still_offered_to_its_own_subject_only():
    offer = (("world", ("storm",)), ("Ann", ("Held Key", "mood")), ("Bob", ("mood",)))
    regex = constraint_regex(to_constraint(critic_type(MagnetSettings(), offer, final=False)))
    assert _accepts(regex, _review(("Ann", "Held Key")))
    assert not _accepts(regex, _review(("Bob", "Held Key")))
    for subject in ("world", "Ann", "Bob"):
        assert _accepts(regex, _review((subject, "mood"), (subject, "fresh_name")))
