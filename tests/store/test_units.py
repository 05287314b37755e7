"""Units are committed whole, once, in order; corrections keep their history."""

from __future__ import annotations

import pytest

from agent.store import CommitError, RunStore, StoreError


def test_commit_chapter_records_text_words_state_and_progress(store):
    chapter = store.commit_chapter(1, "Dawn", "The tide came in. 潮水来了。", state={"characters": {"Ann": "wet"}})
    assert chapter.words == 4 + 4 + 0 and chapter.version == 1 and not chapter.degraded
    assert store.chapter(1).text == "The tide came in. 潮水来了。"
    assert store.state() == {"characters": {"Ann": "wet"}}
    assert store.state(0) == {"characters": {}}
    assert store.info().last_unit == 1 and store.next_unit() == 2


def test_out_of_order_and_duplicate_commits_are_refused(store, write_chapters):
    write_chapters(store, ["One.", "Two."])
    with pytest.raises(CommitError, match="already committed"):
        store.commit_chapter(2, "again", "Two again.", state={})
    with pytest.raises(CommitError, match="out of order"):
        store.commit_chapter(4, "skip", "Four.", state={})
    assert [c.text for c in store.chapters()] == ["One.", "Two."]


def test_a_transaction_interrupted_mid_write_leaves_no_partial_chapter(store, monkeypatch):
    import agent.store.chapters as chapter_rows

    def crash_while_indexing(conn, index, text):
        conn.execute(
            "INSERT INTO chapter_windows (chapter, position, start, end, prev, centre, next) "
            "VALUES (?, 0, 0, 1, '', 'x', '')",
            (index,),
        )
        raise KeyboardInterrupt  # Ctrl-C after the chapter row and one window were written

    monkeypatch.setattr(chapter_rows.search, "index_chapter", crash_while_indexing)
    with pytest.raises(KeyboardInterrupt):
        store.commit_chapter(1, "Lost", "This chapter must vanish.", state={"lost": True})
    monkeypatch.undo()
    assert store.chapters() == []
    assert store.query("SELECT count(*) FROM chapter_windows")[0][0] == 0
    assert store.query("SELECT count(*) FROM chapter_versions")[0][0] == 0
    assert store.state() == {"characters": {}}
    assert store.next_unit() == 1
    store.commit_chapter(1, "Kept", "This one stays.", state={})  # the unit can be redone
    assert store.chapter(1).title == "Kept"


def test_correct_replaces_one_exact_span_and_keeps_versions(store, write_chapters):
    write_chapters(store, ["Mara was nine. She had a red scarf."])
    fixed = store.correct_chapter(1, "nine", "eight")
    assert fixed.text == "Mara was eight. She had a red scarf." and fixed.version == 2
    versions = store.chapter_versions(1)
    assert [(v["version"], v["reason"]) for v in versions] == [(1, "write"), (2, "correct")]
    assert versions[0]["text"] == "Mara was nine. She had a red scarf."
    with pytest.raises(CommitError, match="does not occur"):
        store.correct_chapter(1, "twelve", "ten")
    with pytest.raises(CommitError, match=r"occurs \d+ times"):
        store.correct_chapter(1, "ar", "the")
    with pytest.raises(CommitError, match="does not exist"):
        store.correct_chapter(7, "x", "y")
    assert store.chapter(1).version == 2


def test_degraded_flag_and_reason_are_kept(store):
    store.commit_chapter(1, "Short", "Too short.", state={}, degraded=True, degraded_reason="length gate: 2/2500")
    c = store.chapter(1)
    assert c.degraded and c.degraded_reason == "length gate: 2/2500"


def test_magnet_steps_commit_paragraphs_in_order(tmp_path):
    with RunStore.create(tmp_path / "m", pipeline="magnet", unit_kind="step", config={}) as s:
        s.commit_step(
            1,
            ["Lucia hid the letter."],
            state={"holding_back_evidence": True},
            record={"actions": {"Lucia": "hide"}},
            goal="find the letter",
        )
        s.commit_step(2, ["She walked on.", ("transition", "Weeks passed.")], state={"x": 2}, record={})
        assert [(p.step, p.seq, p.kind, p.text) for p in s.paragraphs()] == [
            (1, 0, "narration", "Lucia hid the letter."),
            (2, 0, "narration", "She walked on."),
            (2, 1, "transition", "Weeks passed."),
        ]
        assert s.steps()[0]["goal"] == "find the letter"
        with pytest.raises(CommitError, match="units are steps"):
            s.commit_chapter(3, "no", "chapters here", state={})
        with pytest.raises(CommitError, match="already committed"):
            s.commit_step(2, ["dup"], state={}, record={})


def test_plan_and_target(store):
    store.plans.put("outline", [{"title": "One", "target": 2500}])
    store.plans.put("premise", "A lighthouse.")
    store.plans.put("premise", "A lighthouse, revised.")
    store.set_target(40)
    assert store.plans.all() == {"outline": [{"title": "One", "target": 2500}], "premise": "A lighthouse, revised."}
    assert store.info().target_units == 40


def test_non_json_state_is_refused_before_writing(store):
    with pytest.raises(StoreError, match="JSON"):
        store.commit_chapter(1, "x", "y", state={"bad": object()})
    assert store.chapters() == []


def test_read_only_store_refuses_writes(store, write_chapters):
    write_chapters(store, ["One."])
    with RunStore.open(store.run_dir, readonly=True) as ro:
        with pytest.raises(StoreError, match="read-only"):
            ro.commit_chapter(2, "x", "y", state={})
        assert ro.chapter(1).text == "One."
