"""A writer's road with a real novel: ``fabula import`` Moby-Dick (Project Gutenberg #2701, 210K+ words),
then show, search, export, eval metrics and the view read it at once.

The book's own chapters and words are counted here by hand (its heading lines, ``str.split``
between the markers), apart from fabula's rules, and must equal what was imported.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import main
from agent.store import RunStore
from tests.manuscript.books import FIXTURE, chapters_by_hand, moby_dick

ROOT = Path(__file__).resolve().parents[2]
LATIN_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'_-]*")
"""The paper's word rule (NstAgent A.1), written out again here: ASCII words."""


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("journey")
    source = folder / "moby-dick.txt"
    source.write_text(moby_dick(), encoding="utf-8")
    run = folder / "moby"
    assert main(["import", str(source), "--out", str(run)]) == 0
    return run, str(source)


def test_the_chapters_and_words_are_the_books_own(imported):
    run, _ = imported
    by_hand = chapters_by_hand(moby_dick())
    assert len(by_hand) == 136 and by_hand[-1][0] == "Epilogue"  # 135 chapters and the epilogue
    hand_words = sum(len(" ".join(lines).split()) for _, lines in by_hand)
    assert hand_words > 200_000
    with RunStore.open(run, readonly=True) as store:
        front, *chapters = store.chapters()  # the Etymology and Extracts before chapter 1: kept, never guessed away
        assert [c.title for c in chapters] == [title for title, _ in by_hand]
        assert sum(len(c.text.split()) for c in chapters) == hand_words
        assert store.words_written() - front.words == sum(
            len(LATIN_WORD.findall(" ".join(lines))) for _, lines in by_hand
        )
        assert front.title == "" and "ETYMOLOGY." in front.text and "Sub-Sub-Librarian" in front.text
        assert store.info().pipeline == "imported" and store.info().status == "completed"


def test_chapter_one_holds_no_boilerplate_and_nothing_of_the_licence_was_kept(imported):
    run, _ = imported
    with RunStore.open(run, readonly=True) as store:
        first, last = store.chapter(2), store.chapters()[-1]
        every = "\n".join(c.text for c in store.chapters()[1:])  # chapter 1: the front (a transcriber's note too)
        left = {item["what"]: item for item in store.plans.get("left_out")}
    assert first.text.startswith("Call me Ishmael.")
    assert "Gutenberg" not in every and "CONTENTS" not in every and "CHAPTER 2. The Carpet-Bag." not in every
    assert left["table of contents"]["words"] > 600 and "CHAPTER 135." in left["table of contents"]["text"]
    assert "START OF THE PROJECT GUTENBERG" in left["Project Gutenberg header"]["text"]
    assert last.text.rstrip().endswith("only found another orphan.")


def test_search_answers_from_the_last_chapter(imported, capsys):
    run, _ = imported
    assert main(["search", str(run), "devious-cruising Rachel orphan", "-k", "3", "--json"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert hits and hits[0]["chapter"] == 137 and "devious-cruising Rachel" in hits[0]["text"]


def test_show_export_and_metrics_work_on_it(imported, capsys, tmp_path):
    run, _ = imported
    assert main(["show", str(run)]) == 0
    shown = capsys.readouterr().out
    assert "pipeline  imported" in shown and "progress  137/137 chapters" in shown and "status    completed" in shown
    assert main(["export", str(run), "--format", "md", "-o", str(tmp_path / "book.md")]) == 0
    book = (tmp_path / "book.md").read_text(encoding="utf-8")
    assert 'title: "Moby Dick; Or, The Whale"' in book and 'author: "Herman Melville"' in book
    story = book.split("Call me Ishmael.")[1]
    assert "Gutenberg" not in story and book.count("\n# ") == 137
    assert main(["eval", "metrics", str(run), "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out.splitlines()[0])
    with RunStore.open(run, readonly=True) as store:
        assert metrics["words"] == store.words_written()


def test_the_view_shows_it(imported):
    pytest.importorskip("starlette", reason="fabula view needs the view extra")
    from starlette.testclient import TestClient

    from agent.view.app import create_app

    run, _ = imported
    client = TestClient(create_app(run.parent))
    assert "Moby Dick" in client.get("/").text
    story = client.get(f"/run/{run.name}/story")
    assert story.status_code == 200 and "Call me Ishmael." in story.text
    assert client.get(f"/run/{run.name}/state").status_code == 200


def test_the_fixture_is_small():
    assert FIXTURE.stat().st_size < 600_000


def test_its_own_epub_export_imports_back_to_the_same_book(imported, tmp_path, capsys):
    pytest.importorskip("ebooklib", reason="EPUB export and import need ebooklib")
    run, _ = imported
    assert main(["export", str(run), "--format", "epub", "-o", str(tmp_path / "moby.epub")]) == 0
    assert main(["import", str(tmp_path / "moby.epub"), "-o", str(tmp_path / "again")]) == 0
    with RunStore.open(run, readonly=True) as first, RunStore.open(tmp_path / "again", readonly=True) as again:
        assert [c.text.split() for c in again.chapters()] == [c.text.split() for c in first.chapters()]
        verse = again.chapter(10).text  # Father Mapple's hymn: one line per <br>
        assert "“The ribs and terrors in the whale, Arched over me a dismal gloom,\nWhile all" in verse
        assert again.words_written() == first.words_written()


def test_a_subprocess_refuses_bad_input_in_one_line_with_exit_2(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    result = subprocess.run(
        [sys.executable, "-m", "agent.cli", "import", str(tmp_path / "empty.txt"), "-o", str(tmp_path / "run")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "is empty" in result.stderr
    assert not (tmp_path / "run").exists()
