"""State updates in the chapter loop (issue 13 item 5): evidence per entry, one retry of refused
entries, identity facts, resolve keys from the open requirements, no forced past event."""

from __future__ import annotations

import json

import pytest

from agent.errors import ConfigError
from agent.nst.chapter.loop import ChapterLoop
from agent.nst.chapter.planned import Plan
from agent.nst.chapter.tools import update_grammar
from agent.nst.config import NstConfig
from agent.nst.state import NarrativeState
from agent.testing.author import Author, chapter_text, offered, quotes_from, update_json, without_evidence

PLAN = {
    "outline": [
        {"id": i, "title": f"Part {i}", "description": f"Part {i} happens.", "target_words": 100} for i in range(1, 4)
    ]
}


def run_chapter(store, config, author, state=None, index=1, **kw):
    loop = ChapterLoop(
        author,
        store,
        plan=Plan.of(PLAN),
        story_prompt="prompt",
        state=state or NarrativeState(),
        index=index,
        config=NstConfig.coerce({**config, **kw}),
        ratio=1.3,
    )
    return loop, loop.run()


def scripted(*replies):
    queue = iter(replies)
    return lambda request, tools: next(queue)(request)


def write(request):
    return json.dumps({"tool": "write", "title": "T"})


def test_an_unsupported_evidence_quote_refuses_that_entry_only_and_the_model_may_retry_it(store, config):
    def first_update(request):
        data = json.loads(update_json(1, events=2, characters=1, facts=2, text=chapter_text(request)))
        data["add_past_event"][1]["evidence"] = "the bell was made of solid gold"  # not in the chapter
        return json.dumps(data)

    def retry(request):
        event = {
            "key": "ch1_event_1",
            "description": "Event 1 happened.",
            "evidence": quotes_from(chapter_text(request), 3)[2],
        }
        return json.dumps(
            {
                "tool": "update",
                "upsert_character_state": [],
                "add_past_event": [event],
                "add_future_requirement": [],
                "resolve_future_requirement": [],
            }
        )

    author = Author(policy=scripted(write, first_update, retry, lambda r: json.dumps({"tool": "finish"})))
    _, result = run_chapter(store, config, author)
    updates = [c for c in store.ledger.tool_calls() if c.tool == "update"]
    assert [c.ok for c in updates] == [True, True]
    first = updates[0]
    assert "REFUSED 1 entry" in first.result and "'ch1_event_1'" in first.result and "solid gold" in first.result
    assert first.arguments["refused"] and "may call update once more" in first.result
    state = result.state
    assert set(state.past_events) == {"ch1_event_0", "ch1_event_1"}  # the rest applied, the retry fixed one
    assert state.provenance["past_events"]["ch1_event_0"]["chapter"] == 1
    (name,) = state.characters
    assert state.characters[name]["facts"] == {
        "age": state.characters[name]["facts"]["age"],
        "birth_date": state.characters[name]["facts"]["birth_date"],
    }
    # the retry is offered once, as an option: finish is legal beside it, and no second retry
    turns = [r for r in author.requests if r.role == "nst_turn"]
    assert {"update", "finish"} <= set(offered(turns[2])) and "update" not in offered(turns[3])


def test_with_evidence_off_quotes_are_not_checked(store, config):
    """... nor asked for: the update grammar and the system prompt have no evidence (the paper's Eq. 6)."""

    def update(request):
        assert '"evidence"' not in json.dumps(request.constraint.json_schema)
        assert "evidence" not in request.messages[0]["content"]
        return without_evidence(update_json(1, events=1, characters=0, requirement=False, text=""), request)

    author = Author(policy=scripted(write, update, lambda r: json.dumps({"tool": "finish"})))
    _, result = run_chapter(store, config, author, evidence=False)
    assert list(result.state.past_events) == ["ch1_event_0"]


def test_resolve_keys_are_an_enum_of_the_open_requirements(store, config):
    state = NarrativeState(future_requirements={"bell_rings": "x", "key_found": "y"})
    schema = update_grammar(("bell_rings", "key_found")).model_json_schema()
    assert schema["properties"]["resolve_future_requirement"]["items"]["enum"] == ["bell_rings", "key_found"]
    assert update_grammar(()).model_json_schema()["properties"]["resolve_future_requirement"]["maxItems"] == 0

    def bad_resolve(request):
        data = json.loads(update_json(2, events=1, characters=0, requirement=False, text=chapter_text(request)))
        data["resolve_future_requirement"] = ["no_such_key"]
        return json.dumps(data)

    def good_resolve(request):
        return update_json(
            2, events=1, characters=0, requirement=False, text=chapter_text(request), resolve=["key_found"]
        )

    store.commit_chapter(1, "Part 1", "x " * 100, state={})
    author = Author(policy=scripted(write, bad_resolve, good_resolve, lambda r: json.dumps({"tool": "finish"})))
    _, result = run_chapter(store, config, author, state=state, index=2, lookback=False)
    calls = store.ledger.tool_calls()
    assert calls[1].tool == "invalid" and "'bell_rings' or 'key_found'" in calls[1].error  # the grammar refuses it
    assert result.state.future_requirements == {"bell_rings": "x"}


def test_no_past_event_is_forced_unless_the_setting_asks(store, config):
    assert "minItems" not in update_grammar(()).model_json_schema()["properties"]["add_past_event"]
    assert update_grammar((), 1).model_json_schema()["properties"]["add_past_event"]["minItems"] == 1

    def empty(request):
        return json.dumps(
            {
                "tool": "update",
                "upsert_character_state": [],
                "add_past_event": [],
                "add_future_requirement": [],
                "resolve_future_requirement": [],
            }
        )

    author = Author(policy=scripted(write, empty, lambda r: json.dumps({"tool": "finish"})))
    _, result = run_chapter(store, config, author)
    assert result.state.past_events == {} and not result.degraded
    author = Author(
        policy=scripted(
            write, empty, lambda r: update_json(1, text=chapter_text(r)), lambda r: json.dumps({"tool": "finish"})
        )
    )
    _, result = run_chapter(store, config, author, min_past_events=1)
    assert [c.tool for c in store.ledger.tool_calls()][-3:] == ["invalid", "update", "finish"]
    assert result.state.past_events


def test_the_one_retry_is_spent_even_when_it_fails(store, config):
    def refused_event(request):
        data = json.loads(update_json(1, events=2, characters=0, requirement=False, text=chapter_text(request)))
        data["add_past_event"][1]["evidence"] = "words that are nowhere in the chapter"
        return json.dumps(data)

    def again(request):
        return json.dumps(
            {
                "tool": "update",
                "upsert_character_state": [],
                "add_future_requirement": [],
                "add_past_event": [{"key": "ch1_event_1", "description": "x", "evidence": "still not there"}],
                "resolve_future_requirement": [],
            }
        )

    author = Author(policy=scripted(write, refused_event, again, lambda r: json.dumps({"tool": "finish"})))
    _, result = run_chapter(store, config, author)
    assert [(c.tool, c.ok) for c in store.ledger.tool_calls()] == [
        ("write", True),
        ("update", True),
        ("update", False),
        ("finish", True),
    ]
    assert "nothing more was applied" in store.ledger.tool_calls()[2].result
    assert list(result.state.past_events) == ["ch1_event_0"] and not result.degraded


BOGUS_EVENT = {"key": "como", "description": "dejando", "evidence": "dejando"}
"""The refused update a 135M model re-sent 25 times in a row on the light install (its evidence is
not in the chapter), until the context was full."""


def stubborn(update):
    """A model that writes, then answers every update grammar with ``update`` (the full update's
    text, or any text for a reply that cannot be read); the one-event fallback gets the bogus event."""

    def policy(request, tools):
        offered_now = offered(request)
        if not offered_now:
            return json.dumps({"add_past_event": [BOGUS_EVENT]})
        return write(request) if "write" in offered_now else update

    return policy


REFUSED = json.dumps(
    {
        "tool": "update",
        "upsert_character_state": [],
        "add_past_event": [BOGUS_EVENT],
        "add_future_requirement": [],
        "resolve_future_requirement": [],
    }
)


@pytest.mark.parametrize(
    "update", [REFUSED, '{"tool": "update", "upsert_character_state": [{"name": "x'], ids=["refused", "cut off"]
)
def test_update_attempts_that_fail_in_a_row_end_the_chapters_turns(store, config, update):
    author = Author(policy=stubborn(update))
    _, result = run_chapter(store, config, author)
    assert not any(c.ok for c in store.ledger.tool_calls() if c.tool == "update")
    failed = [
        c for c in store.ledger.tool_calls() if c.tool in ("update", "invalid") and not c.arguments.get("fallback")
    ]
    assert len(failed) == 3  # then the fallback: the full update, then one event
    assert result.degraded and result.reason == "state not updated: 3 update attempts in a row failed"
    assert len(author.requests) == 7  # write, prose, three updates, the two fallback asks


def test_the_small_profiles_fallback_asks_for_one_event_only_after_one_failed_attempt(store, config):
    """The small profile (``failed_update_limit=1``, ``fallback_full_update=false``): a tiny model's
    full updates failed again and again, so one failure leads straight to the one-event ask."""
    small = NstConfig.profile_settings("small")
    author = Author(policy=stubborn(REFUSED))
    _, result = run_chapter(
        store,
        config,
        author,
        failed_update_limit=small["failed_update_limit"],
        fallback_full_update=small["fallback_full_update"],
    )
    calls = [(c.tool, c.ok, bool(c.arguments.get("fallback"))) for c in store.ledger.tool_calls()]
    assert calls == [("write", True, False), ("update", False, False), ("update", False, True)], calls
    assert store.ledger.tool_calls()[-1].arguments["add_past_event"] == [BOGUS_EVENT]  # the one-event reply
    assert result.reason == "state not updated: the update attempt failed"
    assert len(author.requests) == 4  # write, prose, one update, one event
    assert "Record only the one most important event" in author.requests[-1].messages[-1]["content"]


def test_without_the_limit_a_failing_update_is_asked_until_the_turn_cap(store, config):
    """The paper profile (``failed_update_limit=0``): the reference has no such rule."""
    assert NstConfig.profile_settings("paper")["failed_update_limit"] == 0
    _, result = run_chapter(store, config, Author(policy=stubborn(REFUSED)), failed_update_limit=0, max_turns=12)
    refused = [c for c in store.ledger.tool_calls() if c.tool == "update" and not c.arguments.get("fallback")]
    assert len(refused) >= 8 and result.reason == "state not updated within 12 turns"


def test_other_tools_refused_meanwhile_leave_the_update_its_attempts(store, config):
    """Refused corrects (the failed-call budget's) neither count nor reset: the update still gets
    its turns and applies (a real run's pattern: three corrects with old == new, then the update)."""

    def correct_same(request):
        return json.dumps({"tool": "correct", "chapter": 1, "old": "the", "new": "the", "reason": "x"})

    def update(request):
        return update_json(1, events=1, characters=0, requirement=False, text=chapter_text(request))

    author = Author(
        policy=scripted(
            write,
            correct_same,
            correct_same,
            correct_same,
            correct_same,
            update,
            lambda r: json.dumps({"tool": "finish"}),
        )
    )
    _, result = run_chapter(store, config, author)
    assert [c.ok for c in store.ledger.tool_calls() if c.tool == "correct"] == [False] * 4
    assert not result.degraded and list(result.state.past_events) == ["ch1_event_0"]


def _max_items(schema: dict, *path: str) -> int | None:
    node = schema["properties"]
    for name in path[:-1]:
        node = schema["$defs"][node[name]["items"]["$ref"].rsplit("/", 1)[1]]["properties"]
    return node[path[-1]].get("maxItems")


def test_the_small_profiles_update_grammar_holds_each_array_to_one_entry(store, config):
    """``update_entry_limit`` (small: 1): a 135M model's update cut at its 512 tokens listed one
    character twice, facts and all; the grammar now ends each array at the limit, and a reply
    over it (a server that ignores the grammar) is refused as invalid."""
    limit = NstConfig.profile_settings("small")["update_entry_limit"]
    assert limit == 1
    schema = update_grammar(("bell_rings",), 1, True, entries=limit).model_json_schema()
    arrays = ("upsert_character_state", "add_past_event", "add_future_requirement", "resolve_future_requirement")
    assert [_max_items(schema, name) for name in arrays] == [1, 1, 1, 1]
    assert _max_items(schema, "upsert_character_state", "facts") == 1
    assert schema["properties"]["add_past_event"]["minItems"] == 1
    unlimited = update_grammar(("bell_rings",), 1, True).model_json_schema()
    assert {_max_items(unlimited, name) for name in arrays} == {None}
    with pytest.raises(ConfigError, match=r"^settings: update_entry_limit=1 is under min_past_events=2: no update"):
        NstConfig.coerce({**config, "update_entry_limit": 1, "min_past_events": 2})

    def too_many(request):
        assert _max_items(request.constraint.json_schema, "add_past_event") == limit  # what the turn offered
        return update_json(1, events=limit + 1, characters=0, requirement=False, text=chapter_text(request))

    def within(request):
        return update_json(1, events=limit, characters=0, requirement=False, text=chapter_text(request))

    author = Author(policy=scripted(write, too_many, within, lambda r: json.dumps({"tool": "finish"})))
    _, result = run_chapter(store, config, author, update_entry_limit=limit, lookback=False)
    calls = store.ledger.tool_calls()
    assert [c.tool for c in calls] == ["write", "invalid", "update", "finish"]
    assert f"at most {limit} item" in calls[1].error
    assert len(result.state.past_events) == limit and not result.degraded


UPDATE_CHARS_PER_TOKEN = 2.77
"""The median characters a token of SmolLM2-135M's update replies over the sixth round's 600-word
runs (24 replies of 100+ tokens; docs/design/embedded-speed.md, the seventh round)."""


def _longest(schema: dict, node: dict, limits: dict, default: int, key: str | None = None) -> int:
    """The most characters a reply to ``schema`` may hold when each JSON string closes at its
    key's limit (one optional space around every separator, as the grammar allows)."""
    if "$ref" in node:
        return _longest(schema, schema["$defs"][node["$ref"].rsplit("/", 1)[1]], limits, default, key)
    if "anyOf" in node:
        return max(_longest(schema, option, limits, default, key) for option in node["anyOf"])
    if "const" in node or "enum" in node:
        return max(len(json.dumps(value)) for value in node.get("enum", [node.get("const")]))
    if node["type"] == "object":
        fields = node["properties"].items()
        return 2 + sum(len(json.dumps(name)) + 4 + _longest(schema, v, limits, default, name) for name, v in fields)
    if node["type"] == "array":
        return 2 + node["maxItems"] * (2 + _longest(schema, node["items"], limits, default, key))
    assert node["type"] == "string", node
    limit = limits.get(key, default)
    assert limit is not None, f"{key} has no limit: the grammar does not bound the reply"
    return 2 + limit


def test_the_small_profiles_update_budget_holds_the_longest_update_its_grammar_allows():
    """An update the grammar lets finish is judged (accepted or refused by the tool); one cut at
    ``update_max_tokens`` is a failed call. With its field limits and one entry per array, the
    small profile's longest update fits its budget at the 135M model's token density; with two
    entries per array it would not (a budget sized without the grammar's bound)."""
    small = NstConfig.parse({"prompt": "x", "words": 600, **NstConfig.profile_settings("small")})
    sampling = small.structured_sampling
    limits, default = dict(sampling.max_string_chars_by_key or {}), sampling.max_string_chars
    assert default is not None and small.update_entry_limit == 1

    def longest(entries: int) -> int:
        schema = update_grammar(("bell_rings",), 1, True, entries=entries).model_json_schema()
        return _longest(schema, schema, limits, default)

    assert longest(1) / UPDATE_CHARS_PER_TOKEN <= small.update_max_tokens < longest(2) / UPDATE_CHARS_PER_TOKEN
    assert small.update_max_tokens < NstConfig.parse({"prompt": "x", "words": 600}).update_max_tokens


LOOPED = '{"tool": "update", "upsert_character_state": [{"name": "' + "the bell the bell " * 2000


@pytest.mark.parametrize("ask_again", [True, False])
def test_a_looped_update_asked_alone_is_asked_again_only_where_the_profile_says(store, config, ask_again):
    """The small profile (``ask_again_looped_update=false``): a looped update that was the only tool on
    offer fails at once and the one-event fallback follows; elsewhere the LLM layer's second try (a
    firmer penalty) comes first. A looped reply in a turn that offered other tools too is always asked again."""
    small = NstConfig.profile_settings("small")
    assert small["ask_again_looped_update"] is False
    author = Author(policy=stubborn(LOOPED))
    run_chapter(
        store,
        config,
        author,
        lookback=False,  # after the write the update is the only tool left
        failed_update_limit=small["failed_update_limit"],
        fallback_full_update=small["fallback_full_update"],
        ask_again_looped_update=ask_again,
    )
    updates = [r for r in author.requests if "update" in offered(r)]
    assert all(offered(r) == ["update"] for r in updates)
    assert len(updates) == (2 if ask_again else 1)
    assert len(author.requests) == (5 if ask_again else 4)  # write, prose, the update (and its retry), one event
    assert "Record only the one most important event" in author.requests[-1].messages[-1]["content"]
