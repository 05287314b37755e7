"""Chapters found at each heading style, with --split, and what is not story left out and said so."""

from __future__ import annotations

import pytest

from agent.errors import InputError
from agent.manuscript.headings import number_of, roman
from agent.manuscript.split import split_text

PROSE = "She walked to the harbour and counted the boats. The tide was late that night.\n"


def book(*headings: str, before: str = "") -> str:
    return before + "".join(f"{h}\n\n{PROSE}\n" for h in headings)


@pytest.mark.parametrize(
    ("text", "fmt", "titles", "numbers"),
    [
        (book("# One", "# Two", "# Three"), "markdown", ["One", "Two", "Three"], [None, None, None]),
        (book("## Chapter 1", "## Chapter 2"), "markdown", ["Chapter 1", "Chapter 2"], [1, 2]),
        (book("Chapter 12", "Chapter 13"), "text", ["Chapter 12", "Chapter 13"], [12, 13]),
        (
            book("CHAPTER XII. The Storm.", "CHAPTER XIII. The Calm."),
            "text",
            ["CHAPTER XII. The Storm.", "CHAPTER XIII. The Calm."],
            [12, 13],
        ),
        (
            book("Chapter Twenty-One", "Chapter Twenty-Two"),
            "text",
            ["Chapter Twenty-One", "Chapter Twenty-Two"],
            [21, 22],
        ),
        (book("I.", "II.", "III. The Return"), "text", ["I.", "II.", "III. The Return"], [1, 2, 3]),
        (book("1", "2", "3"), "text", ["1", "2", "3"], [1, 2, 3]),
        (book("Prologue", "Chapter 1", "Epilogue"), "text", ["Prologue", "Chapter 1", "Epilogue"], [None, 1, None]),
    ],
)
def test_each_heading_style_splits_the_book(text, fmt, titles, numbers):
    found = split_text(text, fmt=fmt)
    assert [p.title for p in found.pieces] == titles
    assert [p.number for p in found.pieces] == numbers
    assert all(p.text == PROSE.strip() for p in found.pieces)


def test_markdown_parts_above_numbered_chapters_do_not_split_the_book():
    text = "# Part One\n\n" + book("## Chapter 1", "## Chapter 2") + "# Part Two\n\n" + book("## Chapter 3")
    assert [p.number for p in split_text(text, fmt="markdown").pieces] == [1, 2, 3]


def test_a_markdown_title_above_the_chapters_is_the_book_title_not_a_chapter():
    found = split_text("# The Harbour\n\n" + book("## One", "## Two"), fmt="markdown")
    assert found.title == "The Harbour" and [p.title for p in found.pieces] == ["One", "Two"]


def test_a_short_first_person_paragraph_is_not_a_roman_heading():
    text = book("I.", "II.").replace("counted the boats.", "counted the boats.\n\nI waited.\n\nI")
    assert [p.title for p in split_text(text).pieces] == ["I.", "II."]


def test_prose_that_mentions_a_chapter_does_not_split_it():
    text = book("Chapter 1", "Chapter 2").replace("counted the boats.", "counted the boats.\nChapter 9 was long")
    assert len(split_text(text).pieces) == 2


def test_a_book_without_headings_is_one_chapter_and_said_so_and_split_splits_it():
    text = f"{PROSE}\n* * *\n\n{PROSE}\n* * *\n\n{PROSE}"
    whole = split_text(text)
    assert len(whole.pieces) == 1 and any("--split" in n for n in whole.notes)
    parts = split_text(text, pattern=r"^\* \* \*$")
    assert [p.text for p in parts.pieces] == [PROSE.strip()] * 3


def test_split_with_titled_lines_makes_them_the_titles():
    text = "A preface nobody reads.\n\n" + book("PART ONE: Ice", "PART TWO: Fire")
    found = split_text(text, pattern=r"^PART ")
    assert [p.title for p in found.pieces] == ["PART ONE: Ice", "PART TWO: Fire"]
    assert any("front matter" in n for n in found.notes)


def test_split_that_matches_nothing_or_is_not_a_regex_is_one_line():
    with pytest.raises(InputError, match="matches no line"):
        split_text(book("Chapter 1"), pattern="^ZZZ")
    with pytest.raises(InputError, match="not a regular expression"):
        split_text(book("Chapter 1"), pattern="(")


GUTENBERG = """The Project Gutenberg eBook of The Harbour

Title: The Harbour
Author: A. Writer

*** START OF THE PROJECT GUTENBERG EBOOK THE HARBOUR ***

THE HARBOUR

CONTENTS

CHAPTER I. Boats.

CHAPTER II. Tide.
was late.

CHAPTER III. Home.

PREFACE

This book was written in a hurry by a man who owed money.

{chapters}
*** END OF THE PROJECT GUTENBERG EBOOK THE HARBOUR ***

Section 1. General Terms of Use and Redistributing Project Gutenberg electronic works
"""


def test_gutenberg_header_footer_contents_and_front_matter_are_left_out_and_said_so():
    text = GUTENBERG.format(chapters=book("CHAPTER I. Boats.", "CHAPTER II. Tide.", "CHAPTER III. Home."))
    found = split_text(text)
    assert [p.number for p in found.pieces] == [1, 2, 3]
    assert found.title == "The Harbour" and found.author == "A. Writer"
    joined = "\n".join(p.text for p in found.pieces)
    assert "Gutenberg" not in joined and "owed money" not in joined and "CONTENTS" not in joined
    assert found.pieces[0].text == PROSE.strip()
    said = "\n".join(found.notes)
    for what in ("Project Gutenberg header", "licence footer", "table of contents (3 entries", "front matter"):
        assert what in said, what
    assert len(found.notes) == len(set(found.notes)) == 5  # and one saying the run keeps what was left out
    assert [p.title for p in found.left_out] == [
        "Project Gutenberg header",
        "Project Gutenberg licence footer",
        "table of contents",
        "front matter",
    ]
    assert "owed money" in found.left_out[-1].text


def test_duplicate_and_out_of_order_numbers_keep_file_order_and_say_so():
    found = split_text(book("Chapter 1", "Chapter 3", "Chapter 2", "Chapter 2"))
    assert [p.number for p in found.pieces] == [1, 3, 2, 2]
    (note,) = [n for n in found.notes if "chapter numbers" in n]
    assert "repeated: 2" in note and "out of order: 2 after 3" in note and "file order" in note


def test_plain_text_is_unwrapped_and_verse_kept():
    text = "Chapter 1\n\nThe sea was\ngrey and wide.\n\n    Roll on, thou deep\n    and dark blue ocean\n"
    (piece,) = split_text(text).pieces
    assert piece.text == "The sea was grey and wide.\n\n    Roll on, thou deep\n    and dark blue ocean"


def test_numbers():
    assert [roman(r) for r in ("XIV", "MCMXC", "IIII", "VX")] == [14, 1990, None, None]
    assert [number_of(w) for w in ("12", "twelve", "Twenty-One", "XL")] == [12, 12, 21, 40]


def test_nothing_but_boilerplate_is_refused():
    with pytest.raises(InputError, match="no words of story"):
        split_text("*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\n")
