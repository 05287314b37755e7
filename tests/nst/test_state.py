from __future__ import annotations

import pytest

from agent.nst.state import NarrativeState, UpdateError
from grammars.nst import UpdateCall

CHAPTER = (
    "Mara Venn had been nine when they brought her to Saint Bartholomew\u2019s rectory.\n"
    "Bishop   Haldane said the demon would imitate her. The bell rang twice at dawn."
)


def upd(chars=(), events=(), adds=(), resolves=(), evidence="The bell rang twice") -> UpdateCall:
    snap = {
        "location": "l",
        "goal": "g",
        "relationships": "r",
        "knowledge": "k",
        "possessions": "p",
        "condition": "c",
        "facts": [],
        "evidence": evidence,
    }
    return UpdateCall.model_validate(
        {
            "tool": "update",
            "upsert_character_state": [{"name": n, **snap, **extra} for n, extra in chars],
            "add_past_event": [{"key": k, "description": d, "evidence": evidence} for k, d in events],
            "add_future_requirement": [{"key": k, "description": d, "evidence": evidence} for k, d in adds],
            "resolve_future_requirement": list(resolves),
        }
    )


def test_equation_6():
    s0 = NarrativeState()
    s1 = s0.apply(upd([("Mara", {"goal": "escape"})], [("bell_rang", "The bell rang.")], [("find_key", "k")])).state
    assert s1.characters["Mara"]["goal"] == "escape"
    assert s1.past_events == {"bell_rang": "The bell rang."}
    assert s1.future_requirements == {"find_key": "k"}
    s2 = s1.apply(upd([("MARA", {"goal": "stay"})], [("storm", "A storm.")], [("b", "x")], ["find_key"])).state
    assert s2.characters == {"MARA": {**s1.characters["Mara"], "goal": "stay"}}  # replaced whole, case-insensitive
    assert list(s2.past_events) == ["bell_rang", "storm"]
    assert s2.future_requirements == {"b": "x"}
    assert s0.characters == {} and s1.future_requirements == {"find_key": "k"}  # states are values


def test_an_empty_update_is_legal():
    assert NarrativeState(past_events={"a": "x"}).apply(upd()).state.past_events == {"a": "x"}


def test_resolving_a_requirement_added_in_the_same_update():
    s = NarrativeState().apply(upd(adds=[("a", "x")], resolves=["a"])).state
    assert s.future_requirements == {}


def test_readding_an_event_with_the_same_text_is_a_no_op_and_different_text_refused():
    s = NarrativeState().apply(upd(events=[("e", "one")])).state
    assert s.apply(upd(events=[("e", "one")])).state.past_events == {"e": "one"}
    with pytest.raises(UpdateError, match="already exists"):
        s.apply(upd(events=[("e", "two")]))


@pytest.mark.parametrize("key", ["a" * 65, "x-y"])
def test_key_rules(key):
    with pytest.raises(UpdateError, match="must match"):
        NarrativeState().apply(
            UpdateCall.model_construct(
                tool="update",
                upsert_character_state=[],
                add_past_event=[type("E", (), {"key": key, "description": "d", "evidence": "q"})()],
                add_future_requirement=[],
                resolve_future_requirement=[],
            )
        )
    assert NarrativeState().apply(upd(events=[("a" * 64, "d")])).state.past_events


def test_each_entry_applies_on_its_own_and_an_unknown_resolve_is_a_no_op():
    s = NarrativeState().apply(upd(adds=[("a", "x")])).state
    applied = s.apply(upd([("Ned", {})], [("ok", "fine"), ("k" * 65, "no")], resolves=["missing"]))
    assert applied.state.characters.keys() == {"Ned"} and applied.state.past_events == {"ok": "fine"}
    assert len(applied.refused) == 1 and "must match" in applied.refused[0]
    assert any("missing" in note for note in applied.notes)
    assert applied.state.future_requirements == {"a": "x"} and s.past_events == {}


def test_evidence_must_occur_in_the_chapter_whitespace_and_quote_style_tolerant():
    good = upd(
        [("Mara", {"facts": [{"key": "age_at_exorcism", "value": "nine"}], "evidence": "Saint Bartholomew's rectory"})],
        [("bishop_named", "Bishop Haldane leads the rite.")],
        evidence="Bishop Haldane said the demon",
    )
    applied = NarrativeState().apply(good, chapter=4, text=CHAPTER)
    assert not applied.refused and applied.state.characters["Mara"]["facts"] == {"age_at_exorcism": "nine"}
    assert applied.state.provenance["past_events"]["bishop_named"] == {
        "chapter": 4,
        "quote": "Bishop Haldane said the demon",
    }
    assert applied.state.provenance["characters"]["Mara"]["chapter"] == 4
    mixed = upd([("Elias", {"evidence": "Bishop Armitage ordered Elias"})], [("bell", "The bell rang twice.")])
    applied = NarrativeState().apply(mixed, chapter=5, text=CHAPTER)
    assert list(applied.state.past_events) == ["bell"] and "Elias" not in applied.state.characters
    assert (
        len(applied.refused) == 1
        and "'Elias'" in applied.refused[0]
        and "does not occur in chapter 5" in applied.refused[0]
    )
    with pytest.raises(UpdateError, match="Bishop Armitage"):
        NarrativeState().apply(upd(events=[("x", "y")], evidence="Bishop Armitage"), chapter=5, text=CHAPTER)


def test_an_unchanged_snapshot_needs_no_evidence():
    s = NarrativeState().apply(upd([("Mara", {})]), chapter=1, text=CHAPTER).state
    again = s.apply(upd([("Mara", {})], evidence="not in the text at all"), chapter=2, text=CHAPTER)
    assert not again.refused and again.state.provenance["characters"]["Mara"]["chapter"] == 1


def test_render_puts_past_events_first_in_insertion_order():
    s = NarrativeState().apply(upd([("Zed", {})], [("b_second", "2"), ("a_first", "1")], [("r", "x")])).state
    text = s.render()
    assert text.index("b_second") < text.index("a_first") < text.index("Zed") < text.index('"r"')
    s2 = s.apply(upd([("Zed", {"goal": "new"})], [("c_third", "3")])).state
    # the rendering of the older state is a prefix of the newer one up to the events
    events_old = text.split("\n\nCharacters")[0]
    assert s2.render().startswith(events_old)
    assert NarrativeState.from_json(s2.to_json()) == s2


def test_digests_replace_their_events_in_the_prompt_only():
    s = NarrativeState(
        past_events={"a": "alpha", "b": "beta", "c": "gamma"},
        digests=[{"arc": 0, "chapters": [1, 5], "events": ["a", "b"], "text": "DIGEST"}],
    )
    text = s.render()
    assert "DIGEST" in text and "alpha" not in text and text.index("DIGEST") < text.index("gamma")
    assert s.past_events.keys() == {"a", "b", "c"} and s.find_events("alpha things") == [("a", "alpha")]
