"""The chapter loop reads its outline item typed (``PlannedChapter``), the stored dict unchanged."""

from __future__ import annotations

from agent.nst.chapter.planned import PlannedChapter


def test_a_stored_outline_item_reads_typed():
    item = {"id": 2, "title": "The Road", "description": "they leave", "target_words": "1200"}
    chapter = PlannedChapter.of(item)
    assert chapter == PlannedChapter(id=2, title="The Road", description="they leave", target_words=1200)
    assert item["target_words"] == "1200"
