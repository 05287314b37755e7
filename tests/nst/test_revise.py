"""``fabula revise`` (issue 37): the model rewrites a chapter from the writer's note, through the CLI against
the scripted author behind a vLLM-shaped server. The revision is a new version with a word diff; the
chapter's state is re-derived; later chapters go stale and ``--reconcile`` re-derives them; ``--version K``
restores; a revision killed with SIGKILL is finished by ``--resume`` with nothing lost or doubled."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.cli import main
from agent.nst.revise.rewrite import REVISION_KEY
from agent.store import RunStore
from agent.store.lineage.fork import STALE_KEY
from agent.store.writer.versions import chapter_versions
from agent.testing.author import Author
from agent.testing.author_server import AuthorServer

ROOT = Path(__file__).resolve().parents[2]
PROMPT = "A lighthouse keeper finds a bell that rings by itself."
NOTE = "The storm breaks over the harbour at night and Ines loses the lantern"

pytestmark = pytest.mark.usefixtures("no_model_environment")


class HoldingAuthor(Author):
    """The scripted author, but a request of a role in ``hold`` waits until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.hold: set[str] = set()
        self.held = threading.Event()
        self.release = threading.Event()

    def reply(self, request):
        if request.role in self.hold:
            self.held.set()
            self.release.wait(60)
        return super().reply(request)


@pytest.fixture
def server():
    with AuthorServer(HoldingAuthor(), vllm=True) as running:
        yield running


def written(server: AuthorServer, tmp_path) -> str:
    run = tmp_path / "run"
    assert (
        main(
            [
                "write",
                "nst",
                "--prompt",
                PROMPT,
                "--words",
                "3000",
                "--endpoint",
                server.url,
                "--out",
                str(run),
                "--quiet",
            ]
        )
        == 0
    )
    return str(run)


def versions(run: str, chapter: int) -> list[tuple[int, str]]:
    with RunStore.open(run, readonly=True) as store:
        return [(v.number, v.reason) for v in chapter_versions(store, chapter)]


def test_revise_follows_the_note_keeps_the_old_version_rederives_the_state_and_marks_later_chapters(
    server, tmp_path, capsys
):
    run = written(server, tmp_path)
    with RunStore.open(run, readonly=True) as store:
        old, state_before, calls = store.chapter(2).text, store.state(1), len(store.ledger.llm_calls())
    capsys.readouterr()
    assert main(["revise", run, "--chapter", "2", "--note", NOTE]) == 0
    captured = capsys.readouterr()
    with RunStore.open(run, readonly=True) as store:
        new = store.chapter(2)
        asked = store.ledger.llm_calls()[calls:]
        state = store.state(2)
        stale = store.plans.get(STALE_KEY)
        assert store.plans.get(REVISION_KEY) is None
    # the note is followed (the scripted author opens the chapter with it) and the old text is a version
    assert new.version == 2 and new.text.startswith(NOTE + ".") and old not in new.text
    assert versions(run, 2) == [(1, "write"), (2, f"revise: {NOTE}")]
    # the word diff on stdout: the note added
    assert "+++ chapter 2 version 2" in captured.out and "{+" + NOTE + ".+}" in captured.out
    # the rewrite had the writer's context: the state before chapter 2, the outline, the old text, the gate
    prose = next(c for c in asked if c.role == "nst_prose")
    opening = prose.messages[1]["content"]
    assert "# Outline" in opening and "# Narrative state" in opening and old in opening and NOTE in opening
    assert next(iter(state_before["narrative"]["characters"])) in opening
    assert "accepted range" in prose.messages[-1]["content"]
    # the chapter's state re-derived from the new text (one update call for chapter 2), chapter 3 stale
    assert [c.role for c in asked] == ["nst_prose", "nst_turn"]
    assert state["rederived"]["version"] == 2
    assert stale["unit"] == 2 and stale["state_stale_from"] == 3
    assert "chapter 3 was written before the revision and marked stale" in captured.err


def test_revise_with_reconcile_rederives_the_later_chapters(server, tmp_path, capsys):
    run = written(server, tmp_path)
    capsys.readouterr()
    assert main(["revise", run, "--chapter", "2", "--note", NOTE, "--reconcile", "--no-diff"]) == 0
    out = capsys.readouterr().out
    assert "states of chapters 2-3 re-derived in order" in out and "chapter 3: consistent with the new state" in out
    with RunStore.open(run, readonly=True) as store:
        assert store.plans.get(STALE_KEY) is None and store.state(3)["rederived"]["reconcile"] == 1


def test_an_old_version_is_restored_as_a_new_one(server, tmp_path, capsys):
    run = written(server, tmp_path)
    with RunStore.open(run, readonly=True) as store:
        first = store.chapter(1).text
    assert main(["revise", run, "--chapter", "1", "--note", NOTE]) == 0
    assert main(["revise", run, "--chapter", "1", "--version", "1"]) == 0
    with RunStore.open(run, readonly=True) as store:
        assert store.chapter(1).text == first and store.chapter(1).version == 3
    assert [n for n, _ in versions(run, 1)] == [1, 2, 3]
    assert versions(run, 1)[2][1] == "restore version 1"


def test_notes_file_revises_several_chapters(server, tmp_path, capsys):
    run = written(server, tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("1: Open on the cliff path\n3: End with the bell silent\n  and the sea calm\n", encoding="utf-8")
    assert main(["revise", run, "--notes", str(notes), "--no-diff"]) == 0
    with RunStore.open(run, readonly=True) as store:
        assert store.chapter(1).text.startswith("Open on the cliff path.")
        assert store.chapter(3).text.startswith("End with the bell silent and the sea calm.")
        assert store.chapter(2).version == 1


@pytest.mark.parametrize("held", ["nst_prose", "nst_turn"])
def test_a_revision_killed_midway_is_finished_by_resume_with_nothing_lost(server, tmp_path, held):
    """Killed while drafting (nothing stored yet) or while re-deriving (the new version stored)."""
    run = written(server, tmp_path)
    server.author.hold = {held}
    env = {k: v for k, v in os.environ.items() if k not in ("FABULA_ENDPOINT", "FABULA_MODEL")}
    env["PYTHONPATH"] = str(ROOT)
    child = subprocess.Popen(
        [sys.executable, "-m", "agent.cli", "revise", run, "--chapter", "2", "--note", NOTE],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert server.author.held.wait(60), "the revision never reached the held call"
        time.sleep(0.2)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        server.author.hold = set()
        server.author.release.set()
    with RunStore.open(run, readonly=True) as store:
        assert store.plans.get(REVISION_KEY)["chapter"] == 2
        assert store.chapter(2).version == (1 if held == "nst_prose" else 2)
    assert main(["revise", run, "--chapter", "3", "--note", "another"]) == 1  # the unfinished one comes first
    assert main(["revise", run, "--resume"]) == 0
    with RunStore.open(run, readonly=True) as store:
        assert store.plans.get(REVISION_KEY) is None
        assert store.chapter(2).text.startswith(NOTE + ".") and store.state(2)["rederived"]["version"] == 2
    assert versions(run, 2) == [(1, "write"), (2, f"revise: {NOTE}")]  # one revision, stored once


def test_revise_refuses_bad_input_in_one_line(server, tmp_path, capsys):
    run = written(server, tmp_path)
    capsys.readouterr()
    for args, says in (
        (["--chapter", "2"], "say what to do"),
        (["--chapter", "9", "--note", "x"], "chapter 9 does not exist"),
        (["--chapter", "2", "--note", "  "], "the note is empty"),
        (["--chapter", "2", "--version", "7"], "no version 7"),
        (["--resume"], "no unfinished revision"),
    ):
        assert main(["revise", run, *args]) == 2, args
        err = capsys.readouterr().err
        assert says in err, err
    assert versions(run, 2) == [(1, "write")]
