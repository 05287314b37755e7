"""A writer's search (#36): a quoted phrase finds the phrase and nothing else, no sentence comes back
twice from overlapping windows, and the query's words are marked, in ``fabula search`` and the view."""

from __future__ import annotations

import pytest

from agent.cli import main

BOOK = """# Chapter 1

It is a truth universally acknowledged, that a single man in possession of a good fortune must be in want of a wife.
However little known the feelings or views of such a man may be, this truth is so well fixed.
The bell rang in the tower. The bell rang again at noon. Nobody answered the bell.
The neighbours showed a universal good-will to the newcomer, and all was well.

# Chapter 2

The evening passed quietly. Mr. Bennet read by the fire while the rain fell on the lawn.
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("search")
    (folder / "book.md").write_text(BOOK, encoding="utf-8")
    assert main(["import", str(folder / "book.md"), "-o", str(folder / "book")]) == 0
    return str(folder / "book")


def hits(capsys, run: str, query: str) -> list[str]:
    capsys.readouterr()
    assert main(["search", run, query, "-k", "8"]) == 0
    return [line.strip() for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]


def test_a_quoted_phrase_finds_only_the_phrase(run, capsys):
    found = hits(capsys, run, '"universally acknowledged"')
    assert len(found) == 1 and "truth universally acknowledged" in found[0]
    loose = hits(capsys, run, "universally acknowledged")  # unquoted: any of the words, stemmed
    assert any("universal good-will" in h for h in loose)


def test_no_sentence_comes_back_twice(run, capsys):
    found = hits(capsys, run, "bell")
    assert found
    sentences = [s for h in found for s in h.split(". ") if "bell" in s]
    assert len(sentences) == len(set(sentences)), found


def test_the_query_words_are_marked_in_the_view(run):
    pytest.importorskip("starlette")
    from pathlib import Path

    from starlette.testclient import TestClient

    from agent.view.app import create_app

    page = TestClient(create_app(Path(run).parent)).get("/run/book/search", params={"q": '"truth universally"'}).text
    assert '<mark class="term">truth universally</mark>' in page
