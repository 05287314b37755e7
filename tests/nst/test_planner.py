from __future__ import annotations

import json
import re

import pytest

from agent.nst.plan.cache import PlanCache, cache_key
from agent.nst.plan.planner import (
    PlanError,
    chapter_count,
    make_plan,
    outline_schema,
    stages_for,
    target_choices,
    validate_outline,
)
from agent.testing.author import Author, outline_json
from agent.testing.scripted import ScriptedLLM
from grammars.nst import Outline


def test_chapter_count_follows_the_anchors():
    assert [chapter_count(w) for w in (10_000, 20_000, 50_000, 100_000)] == [10, 15, 25, 40]
    assert chapter_count(15_000) in (12, 13)
    assert chapter_count(75_000) in (32, 33)
    assert chapter_count(600) == 2 and chapter_count(500) == 2 and chapter_count(5_000) == 5
    assert chapter_count(300_000) == 100


def test_stages_grow_with_length():
    assert stages_for(600) == ["outline"]
    assert stages_for(5_000) == ["premise", "outline"]
    assert stages_for(20_000) == ["premise", "synopsis", "outline"]
    assert stages_for(100_000) == ["premise", "synopsis", "acts", "outline"]


def outline(*targets: int, ids: list[int] | None = None) -> Outline:
    ids = ids or list(range(1, len(targets) + 1))
    return Outline.model_validate(
        {
            "title": "B",
            "chapters": [
                {"id": i, "title": f"T{i}", "description": "d", "target_words": t}
                for i, t in zip(ids, targets, strict=True)
            ],
        }
    )


def test_outline_validation_rules():
    assert len(validate_outline(outline(500, 500), 1000, 2)) == 2
    with pytest.raises(ValueError, match="sum to 700"):
        validate_outline(outline(350, 350), 1000, 2)
    with pytest.raises(ValueError, match="ids must be"):
        validate_outline(outline(500, 500, ids=[1, 3]), 1000, 2)
    with pytest.raises(ValueError, match="write 10"):
        validate_outline(outline(*[200] * 5), 1000, 10)
    assert len(validate_outline(outline(*[120] * 9), 1000, 10)) == 9  # within the slack of the count


def test_invalid_outline_is_reasked_with_the_error():
    bad = json.dumps(
        {
            "title": "B",
            "chapters": [
                {"id": 1, "title": "A", "description": " ", "target_words": 300},
                {"id": 2, "title": "B", "description": "d", "target_words": 300},
            ],
        }
    )
    good = json.dumps(
        {
            "title": "B",
            "chapters": [
                {"id": 1, "title": "A", "description": "d", "target_words": 300},
                {"id": 2, "title": "B", "description": "d", "target_words": 300},
            ],
        }
    )
    llm = ScriptedLLM([bad, good])
    plan = make_plan(llm, "p", 600, temperature=0.7, max_tokens=100, attempts=3)
    assert [c["target_words"] for c in plan["outline"]] == [300, 300]
    second = llm.requests[1].messages
    assert second[-2]["content"] == bad and "empty title or description" in second[-1]["content"]


def test_the_outline_grammar_carries_count_ids_and_length():
    """Count, ids and targets are closed enums, so any outline the decoder can emit sums to ±20%."""
    for words in (600, 2_000, 10_000, 100_000):
        chapters = chapter_count(words)
        schema = outline_schema(words, chapters).schema
        items = schema["properties"]["chapters"]
        assert items["minItems"] == items["maxItems"] == chapters
        assert items["items"] is False and len(items["prefixItems"]) == chapters
        choices = target_choices(words, chapters)
        for position, item in enumerate(items["prefixItems"], start=1):
            assert item["properties"]["id"]["enum"] == [position]
            assert item["properties"]["target_words"]["enum"] == choices and len(choices) >= 2
        assert 0.8 * words <= chapters * min(choices) and chapters * max(choices) <= 1.2 * words
    llm = ScriptedLLM(
        [
            json.dumps(
                {
                    "title": "B",
                    "chapters": [
                        {"id": 1, "title": "A", "description": "d", "target_words": 100},
                        {"id": 2, "title": "B", "description": "d", "target_words": 100},
                    ],
                }
            )
        ]
    )
    with pytest.raises(PlanError, match="not one of"):
        make_plan(llm, "p", 600, temperature=0.7, max_tokens=100, attempts=1)


def test_the_outline_grammar_holds_chapter_ids_in_order():
    """Ids are positional in the grammar itself: a decoder cannot emit ``[2, 1]`` (the tiny model
    did, three attempts running, under a plain id enum)."""
    from agent.llm.constraints import to_constraint
    from agent.llm.local_decoding import constraint_regex

    def outline(ids: list[int]) -> str:
        return json.dumps(
            {"title": "B", "chapters": [{"id": i, "title": "A", "description": "d", "target_words": 300} for i in ids]}
        )

    pattern = re.compile(constraint_regex(to_constraint(outline_schema(600, 2))))
    assert pattern.fullmatch(outline([1, 2]))
    assert not pattern.fullmatch(outline([2, 1])) and not pattern.fullmatch(outline([1, 1]))
    kept = outline_schema(610, 2, targets=[300, 310]).schema["properties"]["chapters"]["prefixItems"]
    assert [item["properties"]["target_words"]["enum"] for item in kept] == [[300], [310]]  # a re-plan's targets


def test_an_outline_cut_at_max_tokens_is_asked_again_for_shorter_descriptions():
    """A cut reply is not kept: the same user turn is asked again with the request for shorter
    descriptions (once, however often it is cut), with a larger budget; the roles still alternate."""
    good = json.dumps(
        {
            "title": "B",
            "chapters": [
                {"id": 1, "title": "A", "description": "d", "target_words": 300},
                {"id": 2, "title": "B", "description": "d", "target_words": 300},
            ],
        }
    )
    cut = ('{"title": "B", "chapters": [{"id": 1, "title": "A", "description": "A keeper climbs the stair', "length")
    llm = ScriptedLLM([cut, cut, good])
    plan = make_plan(llm, "p", 600, temperature=0.7, max_tokens=100, attempts=3)
    assert [c["target_words"] for c in plan["outline"]] == [300, 300]
    first, second, third = (r.messages for r in llm.requests)
    assert [m["role"] for m in third] == [m["role"] for m in first] == ["system", "user"]
    assert second[-1]["content"] == first[-1]["content"] + "\nKeep each description to two short sentences."
    assert third == second
    assert llm.requests[1].max_tokens > llm.requests[0].max_tokens


def test_outline_attempts_are_bounded():
    bad = json.dumps({"title": "B", "chapters": [{"id": 1, "title": "A", "description": "d", "target_words": 1}]})
    llm = ScriptedLLM([bad] * 3)
    with pytest.raises(PlanError, match="after 3 attempt"):
        make_plan(llm, "p", 600, temperature=0.7, max_tokens=100, attempts=3)
    assert len(llm.requests) == 3


def test_stages_feed_the_next_stage():
    llm = Author()
    plan = make_plan(llm, "a storm prompt", 20_000, temperature=0.7, max_tokens=500, attempts=2)
    assert set(plan) >= {"premise", "synopsis", "outline"} and len(plan["outline"]) == 15
    roles = [r.role for r in llm.requests]
    assert roles == ["plan_premise", "plan_synopsis", "plan_outline"]
    assert plan["premise"] in llm.requests[1].messages[1]["content"]
    assert plan["synopsis"] in llm.requests[2].messages[1]["content"]
    assert outline_json(llm.requests[2])  # the outline request names count and total


def test_plan_cache_round_trip_and_digest(tmp_path):
    cache = PlanCache(tmp_path)
    key = cache_key("m", "prompt", None, 1000)
    assert cache.get(key) is None
    plan = {"outline": [{"id": 1, "title": "A", "description": "d", "target_words": 1000}]}
    cache.put(key, plan)
    assert cache.get(key) == plan
    assert cache.get(cache_key("m", "prompt", None, 2000)) is None
    assert cache.get(cache_key("other", "prompt", None, 1000)) is None
    path = cache.path(key)
    entry = json.loads(path.read_text())
    entry["plan"]["outline"][0]["target_words"] = 5
    path.write_text(json.dumps(entry))
    assert cache.get(key) is None  # digest mismatch: ignored
    assert cache_key("m", "p", "7", 10)["prompt"].startswith("id:7:")


def test_the_outline_stage_keeps_the_premise_and_every_stage_fits_the_context():
    from agent.llm.budget import Budget
    from agent.llm.context import CharsEstimate

    llm = Author()
    plan = make_plan(
        llm,
        "a storm prompt",
        50_000,
        temperature=0.7,
        max_tokens=3900,
        attempts=2,
        budget=Budget(4096, CharsEstimate(), 64),
    )
    outline_request = next(r for r in llm.requests if r.role == "plan_outline")
    text = outline_request.messages[1]["content"]
    assert plan["premise"] in text and plan["acts"] in text and plan["synopsis"] in text
    assert text.index(plan["premise"]) < text.index(plan["synopsis"])
    assert all(CharsEstimate().count(r.messages) + r.max_tokens <= 4096 - 64 for r in llm.requests)
    assert llm.requests[0].max_tokens < 3900  # clamped to the context
