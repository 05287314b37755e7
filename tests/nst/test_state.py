from __future__ import annotations

import pytest

from agent.nst.state import NarrativeState, UpdateError
from grammars.nst import UpdateCall


def upd(chars=(), events=(), adds=(), resolves=()) -> UpdateCall:
    snap = {"location": "l", "goal": "g", "relationships": "r", "knowledge": "k", "possessions": "p",
            "condition": "c"}
    data = {
        "tool": "update",
        "upsert_character_state": [{"name": n, **snap, **extra} for n, extra in chars],
        "add_past_event": [{"key": k, "description": d} for k, d in events],
        "add_future_requirement": [{"key": k, "description": d} for k, d in adds],
        "resolve_future_requirement": list(resolves)}
    if events:
        return UpdateCall.model_validate(data)
    # The grammar requires a past event per update; the state logic must still cope with none.
    valid = UpdateCall.model_validate({**data, "add_past_event": [{"key": "placeholder", "description": "x"}]})
    return valid.model_copy(update={"add_past_event": []})


def test_equation_6():
    s0 = NarrativeState()
    s1 = s0.apply(upd([("Mara", {"goal": "escape"})], [("bell_rang", "The bell rang.")], [("find_key", "k")]))
    assert s1.characters["Mara"]["goal"] == "escape"
    assert s1.past_events == {"bell_rang": "The bell rang."}
    assert s1.future_requirements == {"find_key": "k"}
    s2 = s1.apply(upd([("MARA", {"goal": "stay"})], [("storm", "A storm.")], [("b", "x")], ["find_key"]))
    assert s2.characters == {"MARA": {**s1.characters["Mara"], "goal": "stay"}}  # replaced whole, case-insensitive
    assert list(s2.past_events) == ["bell_rang", "storm"]
    assert s2.future_requirements == {"b": "x"}
    assert s0.characters == {} and s1.future_requirements == {"find_key": "k"}  # states are values


def test_resolving_a_requirement_added_in_the_same_update():
    s = NarrativeState().apply(upd(adds=[("a", "x")], resolves=["a"]))
    assert s.future_requirements == {}


def test_readding_an_event_with_the_same_text_is_a_no_op_and_different_text_an_error():
    s = NarrativeState().apply(upd(events=[("e", "one")]))
    assert s.apply(upd(events=[("e", "one")])).past_events == {"e": "one"}
    with pytest.raises(UpdateError, match="already exists"):
        s.apply(upd(events=[("e", "two")]))


@pytest.mark.parametrize("key", ["a" * 65, "x-y"])
def test_key_rules(key):
    with pytest.raises(UpdateError, match="must match"):
        NarrativeState().apply(UpdateCall.model_construct(
            tool="update", upsert_character_state=[], add_past_event=[type("E", (), {"key": key,
                                                                                     "description": "d"})()],
            add_future_requirement=[], resolve_future_requirement=[]))
    assert NarrativeState().apply(upd(events=[("a" * 64, "d")])).past_events


def test_update_is_atomic():
    s = NarrativeState().apply(upd(adds=[("a", "x")]))
    with pytest.raises(UpdateError) as info:
        s.apply(upd([("Ned", {})], [("ok", "fine")], resolves=["missing"]))
    assert "missing" in str(info.value)
    assert s.characters == {} and s.past_events == {} and s.future_requirements == {"a": "x"}


def test_render_puts_past_events_first_in_insertion_order():
    s = NarrativeState().apply(upd([("Zed", {})], [("b_second", "2"), ("a_first", "1")], [("r", "x")]))
    text = s.render()
    assert text.index("b_second") < text.index("a_first") < text.index("Zed") < text.index('"r"')
    s2 = s.apply(upd([("Zed", {"goal": "new"})], [("c_third", "3")]))
    # the rendering of the older state is a prefix of the newer one up to the events
    events_old = text.split("\n\nCharacters")[0]
    assert s2.render().startswith(events_old)
    assert NarrativeState.from_json(s2.to_json()) == s2
