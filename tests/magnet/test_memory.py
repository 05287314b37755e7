"""Long-range memory: paragraphs indexed as they commit, BM25 recall outside the recent window,
a running recap refreshed by one bounded call every N steps, and failures recorded."""

from __future__ import annotations

import shutil
from pathlib import Path

from agent.llm.types import LLMError
from agent.magnet.runner import write_story
from agent.magnet.settings import MagnetSettings
from agent.store import RunStore
from agent.testing.story_llm import StoryLLM
from tests.magnet.stories import story

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_d73c811" / "magnet"


def _run(tmp_path, llm, words=900, name="run", **settings):
    config = {**MagnetSettings(**settings).as_config(), "story": story(words=words).to_dict()}
    store = RunStore.create(tmp_path / name, pipeline="magnet", config=config, unit_kind="step")
    with store.sessions.hold("start"):
        write_story(store, llm, config)
    return store


def test_paragraphs_are_indexed_as_they_commit_and_as_they_are_revised(tmp_path):
    store = RunStore.create(tmp_path / "r", pipeline="magnet", config={"story": {}}, unit_kind="step")
    store.commit_step(1, ["The lantern swung over the harbour."], state={}, record={})
    store.commit_step(2, ["Ann counted the keys in the pantry."], state={}, record={})
    assert [p.step for p in store.search_paragraphs("lantern harbour", k=5, before_step=3)] == [1]
    assert store.search_paragraphs("lantern", k=5, before_step=1) == []  # only earlier steps
    store.revise_paragraph(1, 0, "The bell rang over the harbour.", reason="test")
    assert store.search_paragraphs("lantern", k=5, before_step=3) == []
    assert [p.text for p in store.search_paragraphs("bell", k=5, before_step=3)] == ["The bell rang over the harbour."]
    assert store.search_paragraphs('" OR NEAR(* :', k=5, before_step=3) == []  # no query syntax leaks


def test_a_legacy_run_gets_its_paragraphs_indexed_on_upgrade(tmp_path):
    shutil.copytree(LEGACY, tmp_path / "m")
    with RunStore.open(tmp_path / "m") as store:
        word = store.paragraphs()[0].text.split()[1]
        assert store.search_paragraphs(word, k=3, before_step=10_000)


def _recalling(location_word):
    def paragraph(request, n):
        return (
            (
                f"In the {location_word} the clock ticked on and on while the fire burned low and the rain fell "
                f"(paragraph {n})."
            )
            if n == 1
            else (f"Rain on the windows, nothing more (paragraph {n}).")
        )

    return paragraph


def test_recall_brings_back_an_earlier_paragraph_about_the_cast_and_their_places(tmp_path):
    llm = StoryLLM(narrator=_recalling("library"))
    store = _run(tmp_path, llm, history_window=2, recall_paragraphs=2, recall_words=10, recap_every=0)
    prompts = [r.messages[1]["content"] for r in llm.by_role("character")]
    later = [p for p in prompts if "Earlier passages that may matter now" in p]
    assert later, "recall never happened"
    for p in later:
        block = p.split("Earlier passages that may matter now:\n\n")[1].split("\n\nRecent story paragraphs")[0]
        assert len(block.split("\n\n")) <= 2  # bounded count
        assert all(len(par.split()) <= 11 for par in block.split("\n\n"))  # bounded words (+ " ...")
    assert any("In the library the clock" in p for p in later)  # Ann is in the library
    records = [s["record"] for s in store.steps()]
    assert all(r["memory"]["recalled"] <= 2 for r in records)


def test_the_recap_is_refreshed_every_n_steps_by_one_bounded_call(tmp_path):
    llm = StoryLLM()
    store = _run(tmp_path, llm, recap_every=3, recap_tokens=50)
    steps = store.info().last_unit
    recaps = llm.by_role("recap")
    assert len(recaps) == len(range(4, steps + 1, 3)) >= 2
    assert all(r.max_tokens == 50 and r.temperature == 0.1 for r in recaps)
    second = recaps[1].messages[1]["content"]
    assert "Recap 1:" in second  # the previous recap is rewritten, not appended
    new = second.split("New paragraphs:\n\n")[1]
    assert "Paragraph 1." not in new and "Paragraph 4." in new  # only what was written since
    units = [row[0] for row in store.query("SELECT unit FROM llm_calls WHERE role = 'recap'")]
    assert units == list(range(4, steps + 1, 3))
    told = [r.messages[0]["content"] for r in llm.by_role("narrator")]  # the story: the system message
    assert "The story so far, in brief:\nRecap 1:" in told[4]
    assert store.state()["recap"].startswith("Recap")


def test_a_failed_recap_keeps_the_previous_one_and_is_recorded(tmp_path):
    llm = StoryLLM(fail=lambda r, n: LLMError("recap timed out") if r.role == "recap" else None)
    store = _run(tmp_path, llm, recap_every=3, retries=0)
    failures = [f for s in store.steps() for f in s["record"]["failures"]]
    assert failures and all(f["role"] == "recap" and f["outcome"] == "kept the previous recap" for f in failures)
    assert store.state()["recap"] == ""
