"""Real public-domain novels of different shapes import with the book's own chapters and every word:
a contents list that runs straight into chapter 1 (Dracula, A Tale of Two Cities), a novel that opens
with four letters (Frankenstein), a prologue and an epilogue (The Phantom of the Opera), numbered
books whose chapters start again at I (A Tale of Two Cities). Each is counted by hand from its own
heading lines (a rule separate from fabula's), and nothing is left out but the licence, a contents
list matched to the chapters and a title page, each kept in the run.

The texts are Project Gutenberg's (#84, #345, #175, #98), gzipped under tests/fixtures/books."""

from __future__ import annotations

import gzip
import re
from functools import cache
from pathlib import Path

import pytest

from agent.manuscript.reading import read_manuscript
from agent.manuscript.split import split_text

BOOKS = Path(__file__).resolve().parents[1] / "fixtures" / "books"


@cache
def text_of(name: str) -> str:
    raw = gzip.decompress((BOOKS / name).read_bytes())
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("cp1252")


def by_hand(text: str, heading: str, body_from: int) -> list[tuple[str, int]]:
    """``(heading, words)`` of each chapter: lines matching ``heading`` from its ``body_from``-th
    occurrence on (the ones before are the contents list), up to the END marker."""
    lines = text.replace("\r\n", "\n").split("\n")
    end = next((i for i, line in enumerate(lines) if line.startswith("*** END OF TH")), len(lines))
    marks = [i for i, line in enumerate(lines[:end]) if re.match(heading, line)][body_from:]
    return [
        (lines[i].strip(), sum(len(line.split()) for line in lines[i + 1 : j]))
        for i, j in zip(marks, [*marks[1:], end], strict=True)
    ]


SHAPES = [
    # file, the book's own heading lines, which occurrence starts the body, chapters, words
    ("frankenstein-pg84.txt.gz", r"^(Letter|Chapter) \d+$", 0, 28, 74_919),  # its contents list is indented
    ("dracula-pg345.txt.gz", r"^CHAPTER [IVXL]+$", 0, 27, 161_101),
    ("phantom-pg175.txt.gz", r"^(Prologue|Chapter [IVXL]+ .*|Epilogue\.)$", 0, 28, 85_195),
    ("twocities-pg98.txt.gz", r"^CHAPTER [IVXL]+\.$", 0, 45, 135_551),
]


@pytest.mark.parametrize(
    ("name", "heading", "body_from", "chapters", "words"), SHAPES, ids=[s[0].split("-pg")[0] for s in SHAPES]
)
def test_a_real_book_imports_with_its_own_chapters_and_every_word(name, heading, body_from, chapters, words):
    hand = by_hand(text_of(name), heading, body_from)
    assert len(hand) == chapters and sum(w for _, w in hand) == words  # the source's own count
    found = split_text(text_of(name))
    assert len(found.pieces) == chapters
    assert [len(p.text.split()) for p in found.pieces] == [w for _, w in hand]
    assert [p.title.split()[:2] for p in found.pieces] == [t.split()[:2] for t, _ in hand]
    left = {p.title for p in found.left_out}
    assert left <= {
        "Project Gutenberg header",
        "Project Gutenberg licence footer",
        "table of contents",
        "front matter",
    }, left
    said = "\n".join(found.notes)
    for part in found.left_out:  # every part left out is said, with its word count
        assert f"{part.words} words" in said, part.title


def test_an_old_style_end_line_goes_with_the_licence_not_the_last_chapter():
    text = (
        "*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\nChapter 1\n\nThe sea was grey.\n\n"
        "Chapter 2\n\nThe tide came in.\n\n\n\nEnd of the Project Gutenberg EBook of X, by A. Writer\n\n"
        "*** END OF THIS PROJECT GUTENBERG EBOOK X ***\n\nThe licence.\n"
    )
    found = split_text(text)
    assert [p.text for p in found.pieces] == ["The sea was grey.", "The tide came in."]
    assert "End of the Project Gutenberg EBook" in found.left_out[-1].text


def test_a_contents_list_that_runs_into_chapter_one_keeps_chapter_one():
    chapter = "She walked to the harbour and counted the boats. " * 200
    text = "A BOOK\n\nCONTENTS\n\nCHAPTER I. The Harbour\nCHAPTER II. The Boats\nCHAPTER III. The Tide\n\n" + "".join(
        f"CHAPTER {n}.\n\n{chapter}\n\n" for n in ("I", "II", "III")
    )
    found = split_text(text)
    assert len(found.pieces) == 3 and all(p.words == 1800 for p in found.pieces)
    assert [p.title for p in found.left_out] == ["table of contents", "front matter"]


def test_short_chapters_in_a_row_that_the_book_does_not_repeat_are_kept_not_taken_for_contents():
    text = "".join(f"Chapter {n}\n\nShe waited by the door.\n\n" for n in range(1, 6))
    found = split_text(text)
    assert [p.number for p in found.pieces] == [1, 2, 3, 4, 5] and not found.left_out


def test_long_text_before_the_first_heading_is_kept_as_a_chapter_and_keep_front_matter_keeps_the_rest(tmp_path):
    opening = "A letter from the captain, written in the ice, that begins the story. " * 30
    text = f"THE ICE\n\nCONTENTS\n\nChapter 1\nChapter 2\nChapter 3\n\n{opening}\n\n" + "".join(
        f"Chapter {n}\n\nThe ship sailed north.\n\n" for n in (1, 2, 3)
    )
    found = split_text(text)
    assert found.pieces[0].title == "" and found.pieces[0].words == 392 and len(found.pieces) == 4  # title too
    kept = split_text(text, keep_front=True)
    every = " ".join(f"{p.title} {p.text}" for p in kept.pieces)
    assert len(every.split()) == len(text.split())  # every word of the file, headings too
    source = tmp_path / "ice.txt"
    source.write_text(text, encoding="utf-8")
    assert len(read_manuscript(source, keep_front=True).pieces) == len(kept.pieces) == 5
