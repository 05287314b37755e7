"""An imported book as a writer meets it (#36): its title and author from the file itself (never
"fabula"), said on import; a Prologue and an Epilogue kept as named chapters with every number as the
book gives it; ``import --dry-run`` without ``-o``; ``fabula outline`` listing the chapters."""

from __future__ import annotations

import zipfile

import pytest

from agent.cli import main

PARAGRAPH = (
    "Call me a reader of the sea. Some years ago, never mind how long precisely, having little money in "
    "my purse, I thought I would sail about a little and see the watery part of the world."
)
BOOK = (
    "\n\n".join(
        [
            "MOBY-DICK; or, THE WHALE.",
            "By Herman Melville",
            "PROLOGUE",
            PARAGRAPH,
            "CHAPTER 1. Loomings.",
            PARAGRAPH,
            "CHAPTER 2. The Carpet-Bag.",
            PARAGRAPH,
            "EPILOGUE",
            PARAGRAPH,
        ]
    )
    + "\n"
)


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "moby.txt"
    path.write_text(BOOK, encoding="utf-8")
    return path


def test_the_import_takes_title_and_author_from_the_first_lines_and_says_so(source, tmp_path, capsys):
    run = tmp_path / "moby"
    assert main(["import", str(source), "-o", str(run)]) == 0
    err = capsys.readouterr().err
    assert 'titled "MOBY-DICK; or, THE WHALE" by Herman Melville, from the book\'s first lines' in err
    assert main(["outline", str(run)]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0].startswith("MOBY-DICK; or, THE WHALE by Herman Melville: 4 chapters")
    assert [line.split("words")[1].strip() for line in listed[1:]] == [
        "PROLOGUE",
        "CHAPTER 1. Loomings.",
        "CHAPTER 2. The Carpet-Bag.",
        "EPILOGUE",
    ]
    epub = tmp_path / "moby.epub"
    assert main(["export", str(run), "-o", str(epub)]) == 0
    with zipfile.ZipFile(epub) as book:
        opf = book.read(next(n for n in book.namelist() if n.endswith(".opf"))).decode()
        nav = book.read(next(n for n in book.namelist() if n.endswith("nav.xhtml"))).decode()
    assert "<dc:creator" in opf and "Herman Melville</dc:creator>" in opf and "MOBY-DICK" in opf
    assert ">EPILOGUE<" in nav and "Chapter 4" not in nav and ">CHAPTER 1. Loomings.<" in nav


def test_a_book_with_no_author_is_anonymous_never_fabula(tmp_path, capsys):
    path = tmp_path / "tale.txt"
    path.write_text("\n\n".join(["Chapter 1", PARAGRAPH, "Chapter 2", PARAGRAPH]) + "\n", encoding="utf-8")
    run = tmp_path / "tale"
    assert main(["import", str(path), "-o", str(run)]) == 0
    assert 'titled "tale" by an unknown author (Anonymous), from the file\'s name' in capsys.readouterr().err
    assert main(["export", str(run), "--format", "md"]) == 0
    front = capsys.readouterr().out.split("\n---\n")[0]
    assert 'author: "Anonymous"' in front and "fabula (" not in front


def test_a_dry_run_needs_no_run_folder(source, tmp_path, capsys):
    assert main(["import", str(source), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "4 chapters" in out and "EPILOGUE" in out
    assert main(["import", str(source)]) == 2
    assert "-o RUN" in capsys.readouterr().err
