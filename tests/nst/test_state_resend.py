"""A past event or requirement sent again under its key (issue 33's "requirement merge").

The reference's NstAgent update (the four-array ``narrative_ops`` mode its entry point fixes) matches
keyed entries by key alone: the same key with the same text, whitespace and letter case aside, is
``unchanged`` and adds nothing; the same key with other text is refused; two keys are two entries,
however alike their texts. Its similarity test (0.65) belongs to another update mode, not the paper's.
fabula does the same under every profile, and the native protocol's per-operation results say so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent.nst.config import NstConfig
from agent.nst.state import NarrativeState, UpdateError, same_text
from agent.testing.author import Author, NativeCall, chapter_of, native_policy, native_update, tool_results
from tests.nst.profile_runs import written
from tests.nst.test_state import upd

OPEN = "Mara must find the brass key before the storm."


def test_the_same_key_with_the_same_text_but_for_spacing_and_case_changes_nothing() -> None:
    s = NarrativeState().apply(upd(events=[("bell_rang", "The bell rang.")], adds=[("find_key", OPEN)])).state
    again = s.apply(
        upd(
            events=[("bell_rang", "the  BELL rang.")],
            adds=[("find_key", "  mara must find the brass KEY\nbefore the storm.")],
        )
    )
    assert not again.refused and again.applied == 0
    assert again.state.future_requirements == {"find_key": OPEN}  # the stored text stays
    assert again.state.past_events == {"bell_rang": "The bell rang."}


def test_the_same_key_with_other_text_is_still_refused() -> None:
    s = NarrativeState().apply(upd(adds=[("find_key", OPEN)])).state
    with pytest.raises(UpdateError, match="already open with a different text"):
        s.apply(upd(adds=[("find_key", "Mara must find the brass key after the storm.")]))


def test_a_resembling_requirement_under_a_new_key_is_a_second_requirement() -> None:
    """No similarity merge: the text differs from the open one by a word (similarity about 0.97)."""
    s = NarrativeState().apply(upd(adds=[("find_key", OPEN)])).state
    alike = "Mara must find the brass key before the storm!"
    assert not same_text(OPEN, alike)
    after = s.apply(upd(adds=[("recover_key", alike)])).state
    assert after.future_requirements == {"find_key": OPEN, "recover_key": alike}


@pytest.mark.parametrize("profile", ["paper", "default"])
def test_a_run_keeps_each_chapters_requirement_though_their_texts_are_the_same(tmp_path: Path, profile: str) -> None:
    """The scripted author opens ``promise_N`` with one text in every chapter (natively under ``paper``,
    under the grammar by default): all stay open, one per key, until resolved by key."""
    store = written(tmp_path / "run", "nst", NstConfig, Author(), profile)
    assert store.info().status == "completed"
    chapters = [u for u in range(1, 10) if store.state(u) is not None]
    opened = {k for u in chapters for k in store.state(u)["narrative"]["future_requirements"]}
    assert opened == {f"promise_{u}" for u in chapters}
    last = store.state()["narrative"]["future_requirements"]
    assert len(last) >= 2 and set(last.values()) == {"The bell must ring again."}


def test_a_native_update_reports_a_resent_requirement_as_unchanged(tmp_path: Path) -> None:
    """Chapter 2's update sends chapter 1's requirement again (in other case) and a new one: the first
    result is ``unchanged`` with why, the counts leave it out, and the state keeps one entry for the key."""

    def policy(author: Author, request: Any) -> tuple[str, list[NativeCall]]:
        results = tool_results(request)
        wrote = any(name == "write" and r.get("ok") for name, r in results)
        if chapter_of(request) == 2 and wrote and not any(name == "update" for name, _ in results):
            data = native_update(request)
            data["add_future_requirement"] = [
                {"key": "promise_1", "description": "the bell must ring  AGAIN."},
                {"key": "promise_1b", "description": "The bell must ring again!"},
            ]
            return "", [("update", data)]
        return native_policy(author, request)

    author = Author(native=policy)
    store = written(tmp_path / "run", "nst", NstConfig, author)
    assert store.info().status == "completed"
    after = [r for r in author.requests if r.role == "nst_turn" and chapter_of(r) == 2][-1]
    update = next(r for name, r in tool_results(after) if name == "update")
    requirements = [r for r in update["results"] if r["state_name"] == "future_requirements"]
    assert [(r["key"], r["action"]) for r in requirements] == [("promise_1", "unchanged"), ("promise_1b", "add")]
    assert requirements[0]["ok"] is True and "already recorded" in requirements[0]["info"]
    assert update["ok"] is True and update["applied_count"] == update["operation_count"] - 1
    state = store.state(2)["narrative"]["future_requirements"]
    assert state["promise_1"] == "The bell must ring again." and state["promise_1b"] == "The bell must ring again!"
