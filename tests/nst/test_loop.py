"""Control flow of one chapter with scripted replies: budgets, gate, drafts, update, finish, cap."""

from __future__ import annotations

import itertools
import json

import pytest

from agent.gate import Gate
from agent.nst.chapter.loop import ChapterLoop
from agent.nst.chapter.planned import Plan
from agent.nst.chapter.sizing import size_tokens
from agent.nst.chapter.tools import ChapterSession, ToolError, check_allowed, legal_tools
from agent.nst.config import NstConfig
from agent.nst.state import NarrativeState
from agent.testing.author import Author, chapter_text, default_policy, gate_of, offered, prose, quotes_from, update_json

PLAN = {
    "outline": [
        {"id": i, "title": f"Part {i}", "description": f"Part {i} happens.", "target_words": 100} for i in range(1, 5)
    ]
}


def commit_earlier(store, upto: int) -> None:
    for i in range(1, upto + 1):
        text = prose(100, seed=i) + f" The silver key {i} lies under the stone."
        store.commit_chapter(i, f"Part {i}", text, state={"narrative": None})


def run_chapter(store, config, author, index=1, narrative=None, **kw):
    loop = ChapterLoop(
        author,
        store,
        plan=Plan.of(PLAN),
        story_prompt="prompt",
        state=narrative or NarrativeState(),
        index=index,
        config=NstConfig.coerce({**config, **kw}),
        ratio=1.3,
    )
    return loop, loop.run()


def read_chapters(request) -> list[int]:
    """The chapter ids the turn's grammar allows ``read`` to name."""
    schema = request.constraint.json_schema
    for node in [schema, *schema.get("$defs", {}).values()]:
        props = node.get("properties", {})
        if props.get("tool", {}).get("const") == "read":
            chapter = props["chapter"]
            return chapter["enum"] if "enum" in chapter else [chapter["const"]]
    raise AssertionError("read is not offered")


def turns(author):
    return [r for r in author.requests if r.role == "nst_turn"]


def test_gate_bounds_and_feedback():
    gate = Gate.for_target(333)
    assert (gate.low, gate.high) == (267, 399)  # ceil(266.4), floor(399.6)
    assert gate.accepts(267) and gate.accepts(399) and not gate.accepts(266) and not gate.accepts(400)
    assert not gate.accepts(300, truncated=True)
    text = gate.feedback(200)
    assert "200 words" in text and "target 333" in text and "267-399" in text and "-133" in text
    assert "cut off" in gate.feedback(300, truncated=True)
    max_tokens, min_tokens = size_tokens(gate, 1.5, cap=32768, use_min=True)
    assert max_tokens > gate.high * 1.5 and min_tokens < gate.low * 1.5
    assert size_tokens(gate, 1.5, cap=100, use_min=False) == (100, None)


def test_happy_path_write_update_finish(store, config):
    author = Author()
    _loop, result = run_chapter(store, config, author)
    assert not result.degraded and result.stats["first_attempt_pass"] is True
    assert result.stats["words"] == 100 and result.title == "Chapter 1"
    assert set(result.state.past_events) == {f"ch1_event_{k}" for k in range(4)}
    assert [c.tool for c in store.ledger.tool_calls()] == ["write", "update", "finish"]
    # chapter 1 has nothing to look up: the first turn offers write and nothing else useful
    assert offered(turns(author)[0]) == ["write"]
    # the conversation only grows: each turn's messages extend the previous turn's
    reqs = author.requests
    for before, after in itertools.pairwise(reqs):
        assert after.messages[: len(before.messages)] == before.messages


def test_prompt_order_and_no_earlier_text(store, config):
    commit_earlier(store, 2)
    author = Author()
    state = NarrativeState(past_events={"old_event": "x"}, characters={"Ann": {"goal": "g"}})
    run_chapter(store, config, author, index=3, narrative=state)
    prompt = author.requests[0].messages[1]["content"]
    order = [
        "# Story prompt",
        "# Outline",
        "Past events",
        "old_event",
        "Characters",
        "Ann",
        "Open future requirements",
        "Completed chapters: 2 of 4",
        "# Current task",
        "Write chapter 3",
    ]
    positions = [prompt.index(marker) for marker in order]
    assert positions == sorted(positions)
    assert "silver key" not in prompt
    assert "accepted range 80-120" in prompt


def test_rejections_feedback_and_draft_retention(store, config):
    sizes = [50, 52, 70, 100]  # distances 30, 28 (not 10% closer: dropped), 10 (replaces), accepted
    author = Author(length=lambda request, attempt: sizes[attempt])
    loop, result = run_chapter(store, config, author)
    assert not result.degraded and result.stats["attempts"] == 4 and result.stats["first_attempt_pass"] is False
    final = loop.messages
    placeholders = [m["content"] for m in final if m["content"].startswith("[rejected draft")]
    assert placeholders == ["[rejected draft: 50 words; text removed]", "[rejected draft: 52 words; text removed]"]
    drafts_in_full = [m for m in final if m["role"] == "assistant" and m["content"] == prose(70, seed=1)]
    assert len(drafts_in_full) == 1
    feedback = [m["content"] for m in final if m["content"].startswith("REJECTED")]
    assert len(feedback) == 3 and "50 words" in feedback[0] and "80-120" in feedback[0]
    calls = [c for c in store.ledger.tool_calls() if c.tool == "write"]
    assert [c.arguments["kept_in_context"] for c in calls[:3]] == [True, False, True]


def test_truncated_draft_is_never_accepted(store, config):
    author = Author(length=lambda request, attempt: (100, "length") if attempt == 0 else 100)
    _, result = run_chapter(store, config, author)
    writes = [c for c in store.ledger.tool_calls() if c.tool == "write"]
    assert writes[0].arguments["truncated"] and not writes[0].arguments["accepted"]
    assert writes[1].arguments["accepted"] and result.stats["attempts"] == 2


def test_turn_cap_keeps_closest_draft_and_marks_degraded(store, config):
    sizes = iter([10, 60, 30] + [20] * 100)
    author = Author(length=lambda request, attempt: next(sizes))
    _loop, result = run_chapter(store, config, author, max_turns=6)
    assert result.degraded and "no draft passed" in result.reason and "60 words" in result.reason
    assert result.text == prose(60, seed=1)
    assert len(turns(author)) == 6 + 1  # six turns, then one fallback update past the cap
    assert result.state.past_events  # the kept chapter still reached the state


def test_last_turns_offer_only_the_required_steps(store, config):
    sizes = iter([10, 10, 100])
    author = Author(length=lambda request, attempt: next(sizes))
    _, result = run_chapter(store, config, author, max_turns=5)
    offers = [offered(r) for r in turns(author)]
    assert offers[2] == ["write"]  # 3 turns left, write+update+finish required
    assert offers[3] == ["update"] and len(offers) == 4  # then finish is the only legal call: automatic
    assert store.ledger.tool_calls()[-1].arguments == {"tool": "finish", "automatic": True}
    assert not result.degraded


def test_update_errors_are_returned_and_update_stays_available(store, config):
    replies = iter(
        [
            lambda r: json.dumps({"tool": "write", "title": "T"}),
            lambda r: json.dumps(
                {
                    "tool": "update",
                    "upsert_character_state": [],
                    "add_past_event": [
                        {"key": "storm", "description": "A storm came.", "evidence": "a storm broke over the harbour"}
                    ],
                    "add_future_requirement": [],
                    "resolve_future_requirement": [],
                }
            ),
            lambda r: update_json(1, text=chapter_text(r)),
            lambda r: json.dumps({"tool": "finish"}),
        ]
    )
    author = Author(policy=lambda request, tools: next(replies)(request))
    _, result = run_chapter(store, config, author)
    calls = store.ledger.tool_calls()
    assert [(c.tool, c.ok) for c in calls] == [("write", True), ("update", False), ("update", True), ("finish", True)]
    assert "nothing was applied" in calls[1].result and "'storm'" in calls[1].result
    assert "update" in offered(turns(author)[2]) and "update" not in offered(turns(author)[3])
    assert result.state.future_requirements == {"promise_1": "The bell must ring again."}


def test_finish_only_after_write_and_update(store, config):
    author = Author()
    run_chapter(store, config, author)
    offers = [offered(r) for r in turns(author)]
    assert "finish" not in offers[0] and "update" not in offers[0] and "finish" not in offers[1]
    assert "finish" in offers[2]
    s = ChapterSession(
        index=2,
        gate=Gate.for_target(100),
        with_state=True,
        lookback=True,
        max_turns=50,
        read_budget=3,
        search_budget=5,
        correct_budget=3,
    )
    with pytest.raises(ToolError, match="cannot finish yet: still needed: write, update"):
        check_allowed(s, "finish")
    with pytest.raises(ToolError, match="after the accepted write"):
        check_allowed(s, "update")


def policy_with(lookups: list[str]):
    """Call each of ``lookups`` first (as long as it is offered), then the default path."""
    queue = list(lookups)

    def policy(request, tools):
        while queue:
            call = json.loads(queue[0])
            if call["tool"] not in tools:
                queue.pop(0)
                continue
            queue.pop(0)
            return json.dumps(call)
        return default_policy(request, tools)

    return policy


def test_read_budget_and_rules(store, config):
    commit_earlier(store, 2)
    reads = [json.dumps({"tool": "read", "chapter": c}) for c in (3, 1, 2, 1, 1)]
    author = Author(policy=policy_with(reads))
    run_chapter(store, config, author, index=3)
    calls = [c for c in store.ledger.tool_calls() if c.tool == "read"]
    assert [(c.arguments["chapter"], c.ok) for c in calls] == [(1, True), (2, True), (1, True)]
    # chapter ids come from an enum of the chapters that exist: the current chapter is not one of
    # them before its write, so the grammar refuses read(3) (an invalid turn, charged as a failed call)
    first = store.ledger.tool_calls()[0]
    assert first.tool == "invalid" and not first.ok
    assert read_chapters(turns(author)[0]) == [1, 2]
    assert "read" not in offered(turns(author)[4])  # charged on success: 3 spent, no longer offered
    s = ChapterSession(
        index=3,
        gate=Gate.for_target(100),
        with_state=True,
        lookback=True,
        max_turns=50,
        read_budget=3,
        search_budget=5,
        correct_budget=3,
        reads=3,
    )
    with pytest.raises(ToolError, match="budget"):
        check_allowed(s, "read")


def test_search_budget_hits_and_earlier_chapters_only(store, config):
    commit_earlier(store, 3)
    searches = [json.dumps({"tool": "search", "query": "silver key lantern"})] * 7
    author = Author(policy=policy_with(searches))
    run_chapter(store, config, author, index=3)  # chapter 3 exists in the store but is not "earlier"... see below
    calls = [c for c in store.ledger.tool_calls() if c.tool == "search"]
    assert len(calls) == 5
    assert "[chapter 3]" not in calls[0].result
    assert calls[0].result.startswith("8 passage(s)")


def test_reference_search_answers_in_the_references_json(store, config):
    """``search_style="reference"`` (the paper profile): the answer is the reference's JSON object, its hits
    ``chapter_id``/``sentence``/``before``/``after`` from the earlier chapters only; no hit is an empty list."""
    commit_earlier(store, 3)
    searches = [json.dumps({"tool": "search", "query": q}) for q in ("silver key lantern", "zzqx nowhere")]
    run_chapter(store, config, Author(policy=policy_with(searches)), index=3, search_style="reference")
    found, empty = [json.loads(c.result) for c in store.ledger.tool_calls() if c.tool == "search"]
    assert list(found) == ["ok", "budget_charged", "query", "hits", "hit_count"]
    assert found["query"] == "silver key lantern" and found["hit_count"] == len(found["hits"]) == 8
    assert all(list(hit) == ["chapter_id", "sentence", "before", "after"] for hit in found["hits"])
    assert {hit["chapter_id"] for hit in found["hits"]} <= {1, 2}
    assert any(hit["sentence"] == "The silver key 2 lies under the stone." for hit in found["hits"])
    assert empty == {"ok": True, "budget_charged": True, "query": "zzqx nowhere", "hits": [], "hit_count": 0}


def test_search_index_sees_corrections(store, config):
    commit_earlier(store, 2)
    lookups = [
        json.dumps(
            {
                "tool": "correct",
                "chapter": 1,
                "old": "silver   key 1",
                "new": "golden key 1",
                "reason": "the key is gold in chapter 2",
            }
        ),
        json.dumps({"tool": "search", "query": "golden"}),
    ]
    author = Author(policy=policy_with(lookups))
    run_chapter(store, config, author, index=3)
    calls = store.ledger.tool_calls()
    assert calls[0].tool == "correct" and calls[0].ok  # whitespace-tolerant match
    assert "golden key 1" in store.chapter(1).text and "[chapter 1]" in calls[1].result
    assert [v["reason"] for v in store.chapter_versions(1)][-1].startswith("correct:")


def test_correct_rules_and_budget(store, config):
    commit_earlier(store, 2)
    fixes = [
        json.dumps({"tool": "correct", "chapter": 1, "old": "the", "new": "a", "reason": "r"}),  # ambiguous
        json.dumps({"tool": "correct", "chapter": 1, "old": "no such text", "new": "a", "reason": "r"}),
        *[
            json.dumps({"tool": "correct", "chapter": c, "old": f"silver key {c}", "new": f"key {c}b", "reason": "r"})
            for c in (1, 2)
        ],
        json.dumps({"tool": "correct", "chapter": 1, "old": "key 1b", "new": "key 1c", "reason": "r"}),
        json.dumps({"tool": "correct", "chapter": 2, "old": "key 2b", "new": "key 2c", "reason": "r"}),
    ]
    author = Author(policy=policy_with(fixes))
    run_chapter(store, config, author, index=3)
    calls = [c for c in store.ledger.tool_calls() if c.tool == "correct"]
    assert [c.ok for c in calls] == [False, False, True, True, True]
    assert "occurs" in calls[0].error and "does not occur" in calls[1].error
    assert "key 1c" in store.chapter(1).text and "key 2b" in store.chapter(2).text  # budget 3 spent


def test_correct_current_chapter_must_stay_in_gate(store, config):
    def policy(request, tools):
        if "update" in tools and not any(c.tool == "correct" for c in store.ledger.tool_calls()):
            return json.dumps(
                {
                    "tool": "correct",
                    "chapter": 1,
                    "old": " ".join(prose(100, seed=1).split()[:12]),
                    "new": "The keeper " + "very " * 40 + "slowly walked",
                    "reason": "r",
                }
            )
        return default_policy(request, tools)

    author = Author(policy=policy)
    _, result = run_chapter(store, config, author, index=1)
    correct = next(c for c in store.ledger.tool_calls() if c.tool == "correct")
    assert not correct.ok and "outside" in correct.error and result.stats["words"] == 100


def test_no_state_ablation(store, config):
    author = Author()
    _, result = run_chapter(store, config, author, state=False)
    offers = [offered(r) for r in turns(author)]
    assert all("update" not in o for o in offers)
    assert result.state is None and [c.tool for c in store.ledger.tool_calls()] == ["write", "finish"]
    assert "Narrative state" not in author.requests[0].messages[1]["content"]
    assert "update" not in author.requests[0].messages[0]["content"]


def test_no_lookback_ablation(store, config):
    commit_earlier(store, 2)
    author = Author()
    run_chapter(store, config, author, index=3, lookback=False)
    offers = [offered(r) for r in turns(author)]
    assert offers[0] == ["write"] and offers[1] == ["update"]
    assert [c.tool for c in store.ledger.tool_calls()] == ["write", "update", "finish"]  # finish automatic


def test_legal_tools_with_lookback():
    s = ChapterSession(
        index=3,
        gate=Gate.for_target(100),
        with_state=True,
        lookback=True,
        max_turns=50,
        read_budget=3,
        search_budget=5,
        correct_budget=3,
    )
    assert legal_tools(s) == ["read", "search", "write", "correct"]
    s.accepted_text = "x"
    assert legal_tools(s) == ["read", "search", "correct", "update"]
    s.updated = True
    assert legal_tools(s) == ["read", "search", "correct", "finish"]


def test_length_sizing_uses_measured_ratio(store, config):
    author = Author(tokens_per_word=2.0)
    _loop, result = run_chapter(store, config, author)
    prose_requests = [r for r in author.requests if r.role == "nst_prose"]
    assert prose_requests[0].max_tokens >= round(gate_of(prose_requests[0])[2] * 1.3)
    assert result.ratio == pytest.approx((1.3 + 2.0) / 2)


def test_a_draft_cut_short_raises_the_ratio_so_the_next_one_fits(store, config):
    # the model really spends 4 tokens a word; sized at 1.4 the first draft is cut well short
    # of the range; the ratio learnt from the cut draft gives the next one room to land in it
    author = Author(
        tokens_per_word=4.0,
        length=lambda request, attempt: (
            (request.max_tokens // 4, "length")
            if request.max_tokens // 4 < gate_of(request)[1]
            else gate_of(request)[0]
        ),
    )
    _, result = run_chapter(store, config, author)
    writes = [c for c in store.ledger.tool_calls() if c.tool == "write"]
    assert writes[0].arguments["truncated"] and not writes[0].arguments["accepted"]
    assert writes[1].arguments["accepted"] and not result.degraded
    assert writes[1].arguments["max_tokens"] > writes[0].arguments["max_tokens"]
    assert result.ratio > 2.0


def test_a_failed_fallback_update_falls_back_to_one_event(store, config):
    # no draft passes, the full fallback update is invalid (a bad key), then the one-event
    # fallback reaches the state: the kept chapter still has its place in the chronology
    author = Author(
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
    _loop, result = run_chapter(store, config, author, max_turns=3)
    assert result.degraded and "no draft passed" in result.reason
    assert list(result.state.past_events) == ["the_storm"] and not result.state.characters
    fallbacks = [c for c in store.ledger.tool_calls() if c.arguments.get("fallback")]
    assert [c.tool for c in fallbacks] == ["invalid", "update"] and fallbacks[-1].ok


def test_a_tool_offered_at_the_turn_is_honoured_on_the_last_spare_turn(store, config):
    # four turns: write, then one spare turn before update and finish: read is offered then,
    # and must be carried out, not refused by a check that counts the turn already taken
    replies = iter(
        [
            lambda r: json.dumps({"tool": "write", "title": "T"}),
            lambda r: json.dumps({"tool": "read", "chapter": 1}),
            lambda r: update_json(1, text=chapter_text(r)),
        ]
    )
    author = Author(policy=lambda request, tools: next(replies)(request))
    _, result = run_chapter(store, config, author, max_turns=4)
    assert "read" in offered(turns(author)[1])
    assert [(c.tool, c.ok) for c in store.ledger.tool_calls()][:3] == [
        ("write", True),
        ("read", True),
        ("update", True),
    ]
    assert not result.degraded


def test_a_tool_with_no_legal_argument_is_not_offered_and_ids_follow_the_story(store, config):
    # chapter 1 before its write: nothing exists to read or correct, so neither is offered;
    # after the accepted write, read and correct name chapter 1 only
    author = Author()
    run_chapter(store, config, author, index=1)
    first, second = turns(author)[0], turns(author)[1]
    assert "read" not in offered(first) and "correct" not in offered(first)
    assert read_chapters(second) == [1]


def test_failed_calls_are_charged_and_then_only_required_steps_are_offered(store, config):
    # the tiny model's loop seen on a real run: once the draft was accepted it kept calling
    # tools that fail; a failed call is charged against a small budget, then only update/finish
    commit_earlier(store, 2)
    bad = [json.dumps({"tool": "correct", "chapter": 1, "old": "no such text", "new": "x", "reason": "r"})] * 10
    author = Author(policy=policy_with(bad))
    _, result = run_chapter(store, config, author, index=3, failed_call_budget=2)
    corrects = [c for c in store.ledger.tool_calls() if c.tool == "correct"]
    assert len(corrects) == 2 and not any(c.ok for c in corrects)
    assert result.stats["failed_calls"] == 2 and not result.degraded
    third = turns(author)[2]
    assert offered(third) == ["write"]  # lookback tools withdrawn after two failures


def test_tool_rules_live_in_the_tool_objects():
    from agent.nst.chapter.tools import TOOLS, turn_grammar

    s = ChapterSession(
        index=3,
        gate=Gate.for_target(100),
        with_state=True,
        lookback=True,
        max_turns=50,
        read_budget=3,
        search_budget=5,
        correct_budget=3,
    )
    assert list(TOOLS) == ["read", "search", "write", "correct", "update", "finish"]
    assert all(TOOLS[name].legal(s) for name in legal_tools(s))
    grammar = turn_grammar(s, legal_tools(s))
    schema = grammar.model_json_schema()
    chapter_enums = [
        d["properties"]["chapter"]["enum"] for d in schema["$defs"].values() if "chapter" in d.get("properties", {})
    ]
    assert chapter_enums == [[1, 2], [1, 2]]  # read and correct: the chapters that exist
    s.failed = s.failed_budget
    assert legal_tools(s) == ["write"]
    with pytest.raises(ToolError, match="too many failed calls"):
        check_allowed(s, "search")
