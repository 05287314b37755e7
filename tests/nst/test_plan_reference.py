"""The reference's chapter outline under ``paper`` (``outline_style`` "reference", issue 33): its count,
request, reply, re-ask and targets, converted to fabula's plan; the default's outline unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.nst.chapter.planned import Plan
from agent.nst.config import NstConfig
from agent.nst.plan import reference
from agent.nst.plan.fit import fit_chapters
from agent.nst.plan.frozen import stages_of
from agent.nst.plan.planner import PlanError, Stages, chapter_count, make_plan, outline_schema
from agent.testing.author import Author, outline_asked
from agent.testing.author_server import infer_role
from agent.testing.scripted import ScriptedLLM

PAPER = Stages(premise_from=10_000, synopsis_from=20_000, acts_from=100_000, synopsis_words=True, free_outline=True)
REFERENCE = Stages(**{**PAPER.__dict__, "outline_style": "reference"})
PROMPT = "A lighthouse keeper finds a bell in the harbour. It rings for ships long sunk."


def chapters(*targets: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"id": i, "name": f"N{i}", "description": f"d{i}", "word_count": t, **extra} for i, t in enumerate(targets)]


def plan_of(replies: list[Any], words: int = 3000, attempts: int = 5, prompt: str = PROMPT) -> tuple[dict, ScriptedLLM]:
    outlines = list(replies)
    llm = ScriptedLLM(lambda r: outlines.pop(0) if r.role == "plan_outline" else f"The {r.role} of the story.")
    plan = make_plan(llm, prompt, words, temperature=0.7, max_tokens=32768, attempts=attempts, shape=REFERENCE)
    return plan, llm


def test_the_paper_profile_asks_for_the_references_outline() -> None:
    config = NstConfig.parse({"prompt": PROMPT, "words": 3000, **NstConfig.profile_settings("paper")})
    assert config.outline_style == "reference" and stages_of(config) == REFERENCE
    assert NstConfig.parse({"prompt": PROMPT, "words": 3000}).outline_style == "fabula"


def test_the_request_has_no_grammar_and_asks_for_an_array_from_0() -> None:
    _, llm = plan_of([json.dumps(chapters(1000, 1000, 1000))])
    (request,) = llm.requests
    assert request.role == "plan_outline" and request.constraint is None and request.output_type is None
    assert request.max_tokens == 32768  # the planner's ceiling, as every reference stage gets
    text = request.messages[-1]["content"]
    assert '{"id": 0, "name": "...", "description": "...", "word_count": <int>}' in text
    assert '{"id": 1, "name"' in text and "JSON array" in text
    assert "title" not in text.lower().replace("the chapter's title", "")  # no book title asked for
    assert "about 3 chapters" in text and "averaging about 1000 words" in text and "±20%" in text
    assert "exactly" not in text


def test_an_unparseable_reply_is_asked_again_and_the_second_accepted() -> None:
    bad = "Sure! I will write the outline next time."
    good = "Here it is.\n```json\n" + json.dumps(chapters(900, 1100, 1000)) + "\n```"
    plan, llm = plan_of([bad, good])
    assert len(llm.requests) == 2 and [c["target_words"] for c in plan["outline"]] == [900, 1100, 1000]
    again = llm.requests[1].messages
    assert again[:2] == llm.requests[0].messages  # the same conversation, grown
    assert again[-2] == {"role": "assistant", "content": bad}
    assert again[-1]["role"] == "user" and "no JSON could be read" in again[-1]["content"]
    assert "JSON array again" in again[-1]["content"] and llm.requests[1].constraint is None


def test_a_refused_outline_is_told_its_error_and_attempts_are_bounded() -> None:
    short = json.dumps(chapters(500, 500, 500))  # 1,500 of 3,000 words
    with pytest.raises(PlanError, match="after 5 attempt"):
        plan_of([short] * 5)
    plan, llm = plan_of([short, json.dumps(chapters(1000, 1000, 1000))])
    feedback = llm.requests[1].messages[-1]["content"]
    assert "add up to 1500" in feedback and "between 2400 and 3600" in feedback
    assert len(plan["outline"]) == 3


def test_a_reply_cut_short_is_asked_again_as_it_was() -> None:
    plan, llm = plan_of([("[{", "length"), json.dumps(chapters(1500, 1500))])
    assert llm.requests[1].messages == llm.requests[0].messages and len(plan["outline"]) == 2


def test_the_count_is_rounded_up_and_free() -> None:
    """Reference ``recommend_chapter_count``: the anchors from (0, 0) to (1M, 100), rounded up."""
    assert [reference.chapter_count(w) for w in (10_000, 20_000, 50_000, 100_000)] == [10, 15, 25, 40]
    assert reference.chapter_count(15_000) == 13 and chapter_count(15_000) == 12  # fabula's rounds
    assert reference.chapter_count(800) == 1 and chapter_count(800) == 2
    assert reference.chapter_count(150_000) == 44 and reference.chapter_count(2_000_000) == 100
    _, llm = plan_of([json.dumps(chapters(*[1000] * 15))], words=15_000)
    assert "about 13 chapters" in llm.requests[-1].messages[-1]["content"]
    plan, _ = plan_of([json.dumps(chapters(*[1000] * 15))], words=15_000)
    assert plan["chapters"] == 13 and len(plan["outline"]) == 15  # no count slack: only a recommendation
    fitted = fit_chapters(NstConfig.parse({"prompt": PROMPT, "words": 15_000, "outline_style": "reference"}), None)
    assert fitted is None  # nothing to fit: no context known


def test_a_long_story_is_not_one_chapter() -> None:
    with pytest.raises(ValueError, match="single chapter"):
        reference.check(chapters(10_000), 10_000)
    assert reference.check(chapters(9_000), 9_000)


def test_the_targets_are_the_planners_unscaled_at_20000_words() -> None:
    """The reference's NstAgent writes to the outline's own word counts: it scales them to the story's
    length only in its ``semantic`` ablation. 15 chapters of 1,400 (21,000, inside ±20 %) stay 1,400."""
    plan, _ = plan_of([json.dumps(chapters(*[1400] * 15))], words=20_000)
    assert [c["target_words"] for c in plan["outline"]] == [1400] * 15
    uneven = [1200, 1500, 1333, 1334, 1339, *[1300] * 10]
    plan, _ = plan_of([json.dumps(chapters(*uneven))], words=20_000)
    assert [c["target_words"] for c in plan["outline"]] == uneven
    author = Author()
    plan = make_plan(author, PROMPT, 20_000, temperature=0.7, max_tokens=32768, attempts=5, shape=REFERENCE)
    assert [c["target_words"] for c in plan["outline"]] == [1333] * 15  # the scripted author's even share


def test_the_plan_is_fabulas_ids_from_1_and_a_title_from_the_prompt() -> None:
    reply = chapters(1000, 1000, 1000)
    reply[0]["id"], reply[2]["id"] = 7, 7  # the model's ids are not trusted: position decides
    del reply[1]["name"]
    plan, _ = plan_of([json.dumps(reply)])
    assert [c["id"] for c in plan["outline"]] == [1, 2, 3]
    assert [c["title"] for c in plan["outline"]] == ["N0", "Chapter 2", "N2"]
    assert set(plan["outline"][0]) == {"id", "title", "description", "target_words"}
    assert plan["title"] == "A lighthouse keeper finds a bell in the"
    typed = Plan.of(plan)
    assert typed.title == plan["title"] and typed.chapter(1).description == "d0" and typed.chapter(3).id == 3
    assert reference.book_title("  \nStorm!  Then calm.") == "Storm" and reference.book_title("...") == "Untitled"


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('[{"id": 0}]', [{"id": 0}]),
        ('Intro\n```json\n[{"id": 1}]\n```\nend', [{"id": 1}]),
        ('```\n{"a": [1]}\n```', {"a": [1]}),
        ('Sure: [1, 2] and then [{"id": 0, "x": "]"}] done', [{"id": 0, "x": "]"}]),  # the longest
        ('{"chapters": [1]} [2]', {"chapters": [1]}),
    ],
)
def test_the_json_is_read_from_a_free_reply(text: str, found: Any) -> None:
    assert reference.extract_json(text) == found


def test_wrappers_and_a_lone_chapter_are_lifted() -> None:
    one = {"id": 0, "name": "a", "description": "b", "word_count": 1}
    assert reference.as_list({"outline": [one]}) == [one] and reference.as_list(one) == [one]
    with pytest.raises(ValueError, match="keys"):
        reference.as_list({"title": "x"})
    with pytest.raises(ValueError, match="whole number"):
        reference.check(chapters(True, 1000), 1000)  # type: ignore[arg-type]


def test_a_teenager_made_twelve_is_refused() -> None:
    twelve = [{"id": 0, "name": "a", "description": "Mara, a 12-year-old, runs.", "word_count": 1000}]
    with pytest.raises(ValueError, match="teenager"):
        reference.check(twelve, 1000, "A teenage girl runs away.")
    assert reference.check(twelve, 1000, "A teenage girl, twelve in the prologue, runs away.")
    assert reference.check(twelve, 1000, "A girl runs away.")


def test_the_scripted_author_answers_and_the_server_recognises_it() -> None:
    author = Author()
    make_plan(author, PROMPT, 3000, temperature=0.7, max_tokens=32768, attempts=5, shape=REFERENCE)
    (request,) = author.by_role("plan_outline")
    assert outline_asked(request) == (3, 3000)
    reply = author.reply(request)[0]
    assert reply.startswith("Here is") and reference.read(reply, 3000)[0]["id"] == 0
    body = {"messages": request.messages, "max_tokens": 100}
    assert infer_role(body) == "plan_outline"
    asked_again = [*request.messages, {"role": "assistant", "content": "x"}, {"role": "user", "content": "refused"}]
    assert infer_role({**body, "messages": asked_again}) == "plan_outline"
    premise = [{"role": "system", "content": "s"}, {"role": "user", "content": "Story prompt:\np\n\nWrite the premise"}]
    assert infer_role({**body, "messages": premise}) == "plan_stage"


def test_the_default_outline_request_is_unchanged() -> None:
    """The default profile keeps fabula's grammar outline: the narrowed schema, exactly N chapters from 1
    with the book's title (scripts/dump_prompts.py shows the requests byte for byte the same)."""
    llm = Author()
    make_plan(llm, PROMPT, 2000, temperature=0.7, max_tokens=500, attempts=2)
    (request,) = llm.by_role("plan_outline")
    assert request.output_type == outline_schema(2000, 2) and request.constraint is not None
    assert request.messages[-1]["content"] == (
        f"Story prompt:\n{PROMPT}\n\n"
        "Write the chapter outline of the story as JSON: the book's title, then exactly 2 chapters with ids 1 to 2, "
        "each with a title, a description of 2-4 sentences of what happens, and target_words. "
        "The targets must sum to 2000 words (about 1000 each; vary them if the story needs it)."
    )
    assert Stages().chapters_for(15_000) == chapter_count(15_000) == 12
