"""Steering: ``fabula fork`` (a copy that shares units 1..N and continues) and ``fabula edit``
(a hand-edited version of a unit, later units stale), with the fake pipeline and the scripted
NstAgent author and Magnet model."""

from __future__ import annotations

import hashlib
import json

import pytest

from agent import pipelines
from agent.cli import main
from agent.store import RunStore
from agent.store.lineage.fork import FORK_KEY, STALE_KEY
from agent.store.writer.edit import VARIABLES_HEADER


def _sha(path) -> str:
    return hashlib.sha256((path / "run.db").read_bytes()).hexdigest()


@pytest.fixture
def four(tmp_path, fake):
    """A completed four-chapter run of the fake pipeline."""
    run_dir = tmp_path / "orig"
    pipelines.start(run_dir, fake.NAME, {"chapters": 4}, pipelines.LLMOptions(backend="scripted")).close()
    return run_dir


def test_fork_shares_units_and_continues_with_changed_settings(four, tmp_path, fake, capsys):
    before = _sha(four)
    out = tmp_path / "fork"
    assert main(["fork", str(four), "--at", "2", "--out", str(out), "--set", "chapters=6"]) == 0
    assert "chapters: 4 -> 6" in capsys.readouterr().err
    assert _sha(four) == before  # the original is never written
    with RunStore.open(out, readonly=True) as fork, RunStore.open(four, readonly=True) as orig:
        assert [c.index for c in fork.chapters()] == [1, 2, 3, 4, 5, 6]
        assert fork.chapter(2) == orig.chapter(2) and fork.state(2) == orig.state(2)
        assert fork.info().status == "completed" and fork.info().config["chapters"] == 6
        assert fork.plans.get(FORK_KEY)["at"] == 2 and fork.plans.get(FORK_KEY)["run"] == str(four)
        # ledger: the copied units' calls plus one per regenerated chapter; search sees only the fork's text
        assert sorted(r[0] for r in fork.query("SELECT unit FROM llm_calls")) == [1, 2, 3, 4, 5, 6]
        assert {h.chapter for h in fork.search("silver key", k=10)} <= set(range(1, 7))
        assert orig.info().last_unit == 4 and len(orig.chapters()) == 4


def test_fork_without_running_is_resumable_and_drops_later_units(four, tmp_path, fake):
    out = tmp_path / "fork"
    assert main(["fork", str(four), "--at", "1", "--out", str(out), "--no-run"]) == 0
    with RunStore.open(out, readonly=True) as fork:
        info = fork.info()
        assert info.last_unit == 1 and info.status == "stopped"
        assert [c.index for c in fork.chapters()] == [1]
        assert fork.state(2) is None and fork.search("chapter 3 silver key", k=5)[0].chapter == 1
        assert fork.query("SELECT count(*) FROM tool_calls WHERE unit > 1")[0][0] == 0
    assert main(["resume", str(out)]) == 0
    with RunStore.open(out, readonly=True) as fork:
        assert [c.index for c in fork.chapters()] == [1, 2, 3, 4] and fork.info().status == "completed"


def test_fork_refuses_a_bad_point_or_an_existing_run(four, tmp_path, fake, capsys):
    assert main(["fork", str(four), "--at", "7", "--out", str(tmp_path / "x")]) == 2
    assert "between 0 and 4" in capsys.readouterr().err
    assert main(["fork", str(four), "--at", "1", "--out", str(four)]) == 2
    assert "outside the run it comes from" in capsys.readouterr().err
    (tmp_path / "other").mkdir()
    assert main(["fork", str(four), "--at", "1", "--out", str(tmp_path / "x2"), "--no-run"]) == 0
    assert main(["fork", str(four), "--at", "1", "--out", str(tmp_path / "x2")]) == 2
    assert "already holds a run" in capsys.readouterr().err


def test_edit_chapter_keeps_the_old_version_and_marks_later_chapters_stale(four, tmp_path, fake, capsys):
    new_text = tmp_path / "ch2.md"
    new_text.write_text("Chapter 2, rewritten by hand. The ferryman now counts no lanterns.", encoding="utf-8")
    assert main(["edit", str(four), "--chapter", "2", "--file", str(new_text)]) == 0
    err = capsys.readouterr().err
    assert "stored version 2" in err and "keeps no state derived from its text" in err
    assert "chapters 3-4 were written before the edit and are marked stale" in err
    with RunStore.open(four, readonly=True) as store:
        assert store.chapter(2).text.startswith("Chapter 2, rewritten by hand")
        versions = store.chapter_versions(2)
        assert [v["reason"] for v in versions] == ["write", "edit"] and "silver key" in versions[0]["text"]
        # the fake pipeline derives no state from its text: the states are stale only after chapter 2
        stale = store.plans.get(STALE_KEY)
        assert stale["unit"] == 2 and stale["state_rederived"] is True and stale["state_stale_from"] == 3
        assert store.search("rewritten by hand")[0].chapter == 2
    # continuing from the edit: a fork at 2 carries the edited text and regenerates 3..4
    out = tmp_path / "fork"
    assert main(["fork", str(four), "--at", "2", "--out", str(out)]) == 0
    with RunStore.open(out, readonly=True) as fork:
        assert fork.chapter(2).text.startswith("Chapter 2, rewritten") and fork.chapter(2).version == 2
        assert fork.plans.get(STALE_KEY) is None and fork.info().last_unit == 4


def test_edit_in_the_editor(four, tmp_path, fake, monkeypatch, capsys):
    script = tmp_path / "ed.sh"
    script.write_text('#!/bin/sh\nsed -i "s/ferryman/boatwoman/" "$1"\n', encoding="utf-8")
    script.chmod(0o755)
    monkeypatch.setenv("EDITOR", str(script))
    monkeypatch.delenv("VISUAL", raising=False)
    assert main(["edit", str(four), "--chapter", "3"]) == 0
    with RunStore.open(four, readonly=True) as store:
        assert "boatwoman counts 3 lanterns" in store.chapter(3).text
    monkeypatch.setenv("EDITOR", "true")  # an editor that changes nothing: nothing stored
    assert main(["edit", str(four), "--chapter", "1"]) == 0
    assert "no change" in capsys.readouterr().err


def test_magnet_edit_step_sets_the_state_and_a_fork_continues_from_it(tmp_path, monkeypatch, capsys):
    from agent.magnet import runner
    from agent.magnet.settings import MagnetSettings
    from agent.testing.story_llm import StoryLLM
    from tests.magnet.stories import story

    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: _recording(StoryLLM(), store))
    config = {**MagnetSettings().as_config(), "story": story(words=400).to_dict()}
    run_dir = tmp_path / "m"
    pipelines.start(run_dir, runner.NAME, config, pipelines.LLMOptions(backend="scripted")).close()
    with RunStore.open(run_dir, readonly=True) as store:
        old = [p for p in store.paragraphs() if p.step == 2]
        last = store.info().last_unit
    document = tmp_path / "step2.txt"
    paragraphs = "\n\n".join(f"Edited paragraph {p.seq}." for p in old)
    document.write_text(f"{paragraphs}\n\n{VARIABLES_HEADER}\ncodicil_missing = false\n", encoding="utf-8")
    assert main(["edit", str(run_dir), "--step", "2", "--file", str(document)]) == 0
    with RunStore.open(run_dir, readonly=True) as store:
        assert [p.text for p in store.paragraphs() if p.step == 2] == [f"Edited paragraph {p.seq}." for p in old]
        assert store.paragraph_versions(2, 0)[0]["text"] == old[0].text
        # Magnet's (subject, attribute) world: a world variable is world.<attribute> (#9)
        assert store.state(2)["world"]["variables"]["world"]["codicil_missing"]["value"] is False
        assert store.state(3)["world"]["variables"]["world"]["codicil_missing"]["value"] is True  # later: stale
        assert store.plans.get(STALE_KEY)["unit"] == 2
    assert main(["edit", str(run_dir), "--step", "2", "--var", 'Ann.location="cellar"']) == 0
    out = tmp_path / "f"
    assert main(["fork", str(run_dir), "--at", "2", "--out", str(out), "--prompt", "The codicil was never lost."]) == 0
    with RunStore.open(out, readonly=True) as fork:
        variables = fork.state(2)["world"]["variables"]
        assert variables["world"]["codicil_missing"]["value"] is False
        assert variables["Ann"]["location"]["value"] == "cellar"
        assert fork.info().config["story"]["premise"] == "The codicil was never lost."
        assert fork.info().status == "completed" and fork.info().last_unit >= 3
        assert json.dumps(fork.state(3)).count('"cellar"') >= 1  # step 3 started from the edited state
    with RunStore.open(run_dir, readonly=True) as store:
        assert store.info().last_unit == last


def test_nst_fork_with_a_new_prompt_writes_on_from_the_shared_chapters(tmp_path, monkeypatch):
    from agent.nst.config import NST_DEFAULTS
    from agent.testing.author import Author

    authors: list[Author] = []

    def open_author(self, store=None):
        authors.append(Author())
        return _recording(authors[-1], store)

    monkeypatch.setattr(pipelines.LLMOptions, "open", open_author)
    config = {
        **NST_DEFAULTS,
        "prompt": "A keeper finds a bell.",
        "prompt_id": None,
        "words": 2700,
        "plan_cache": str(tmp_path / "plans"),
    }
    run_dir = tmp_path / "nst"
    pipelines.start(run_dir, "nst", config, pipelines.LLMOptions(backend="scripted", model="a")).close()
    edited = tmp_path / "ch1.md"
    edited.write_text("The keeper buried the bell under the pier.", encoding="utf-8")
    assert main(["edit", str(run_dir), "--chapter", "1", "--file", str(edited)]) == 0
    out = tmp_path / "fork"
    assert main(["fork", str(run_dir), "--at", "1", "--out", str(out), "--prompt", "A keeper loses a bell."]) == 0
    prompts = [r.messages[1]["content"] for r in authors[-1].requests if r.role == "nst_turn"]
    assert prompts and all("A keeper loses a bell." in p for p in prompts)
    assert not any((r.role or "").startswith("plan") for r in authors[-1].requests)  # the outline is shared
    with RunStore.open(out, readonly=True) as fork, RunStore.open(run_dir, readonly=True) as orig:
        assert [c.index for c in fork.chapters()] == [1, 2, 3] and fork.info().status == "completed"
        assert fork.chapter(1).text == "The keeper buried the bell under the pier."
        assert fork.plans.all()["outline"] == orig.plans.all()["outline"]
        assert fork.state(1) == orig.state(1)
        assert fork.info().config["prompt"] == "A keeper loses a bell." and orig.info().config["prompt"] == (
            "A keeper finds a bell."
        )


def _recording(llm, store):
    if store is not None:
        llm.recorders.append(store.ledger.recorder)
    return llm


def test_the_view_marks_stale_chapters_after_an_edit(four, tmp_path, fake):
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from agent.view.app import create_app

    new_text = tmp_path / "ch2.md"
    new_text.write_text("Rewritten.", encoding="utf-8")
    assert main(["edit", str(four), "--chapter", "2", "--file", str(new_text)]) == 0
    page = TestClient(create_app(four)).get("/run/orig/story").text
    assert 'id="stale-note"' in page and "chapter 2 edited (version 2)" in page
    assert 'class="chapter stale" id="unit-3"' in page and 'class="chapter" id="unit-2"' in page
