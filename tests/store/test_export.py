"""Exports carry the stored text exactly."""

from __future__ import annotations

import json
import re

import pytest

from agent.store import RunStore
from agent.store.export.markdown import export

TEXTS = [
    "It began with rain.\n\n“Who’s there?” she asked — twice.  Double  spaces stay.\n",
    "第二章的开头。她说：“你好！”\r\nA CRLF line, a tab\there, and trailing spaces   ",
    "## Not a heading\n\nEnds without a newline",
]


@pytest.fixture
def full(store, write_chapters):
    store.plans.put("title", "The  Lighthouse\nKeeper")
    write_chapters(store, TEXTS)
    return store


def test_json_round_trips_every_chapter_exactly(full):
    data = json.loads(export(full, "json"))
    assert [c["text"] for c in data["chapters"]] == TEXTS
    assert data["title"] == "The Lighthouse Keeper"
    assert data["run"]["pipeline"] == "nst" and data["run"]["units_done"] == 3
    assert data["final_state"] == {"after": 3}
    assert data["plan"]["title"] == "The  Lighthouse\nKeeper"


def test_markdown_holds_each_chapter_verbatim_in_order(full):
    md = export(full, "md")
    front, body = md.split("\n---\n\n", 1)
    assert front.startswith('---\ntitle: "The Lighthouse Keeper"\nauthor: "fabula (m)"\n')
    assert body.startswith("# Chapter 1: Title 1\n\n")
    bodies = re.split(r"\n\n# Chapter \d+: Title \d+\n\n", body.removeprefix("# Chapter 1: Title 1\n\n"))
    bodies[-1] = bodies[-1].removesuffix("\n")
    assert bodies == TEXTS


def test_text_export_holds_each_chapter_verbatim(full):
    txt = export(full, "txt")
    positions = [txt.index(t) for t in TEXTS]
    assert positions == sorted(positions)
    assert txt.startswith("The Lighthouse Keeper\n=====================\n")


def test_magnet_export_joins_paragraphs(tmp_path):
    with RunStore.create(tmp_path / "m", pipeline="magnet", unit_kind="step", config={}) as s:
        s.commit_step(1, ["One."], state={}, record={})
        s.commit_step(2, ["Two.", ("transition", "Later.")], state={}, record={})
        assert export(s, "md").split("\n---\n\n", 1)[1] == "One.\n\nTwo.\n\nLater.\n"
        assert [p["text"] for p in json.loads(export(s, "json"))["paragraphs"]] == ["One.", "Two.", "Later."]


def test_unknown_format(full):
    with pytest.raises(ValueError, match="unknown export format"):
        export(full, "epub")
