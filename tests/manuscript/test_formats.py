"""EPUB (built from the real novel with ebooklib) and DOCX (built with python-docx) import like text."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.cli import main
from agent.errors import InputError
from agent.manuscript import read_manuscript
from agent.store import RunStore
from tests.manuscript.books import chapters_by_hand, moby_dick

epub = pytest.importorskip("ebooklib.epub", reason="EPUB import needs ebooklib (the view/manuscript extra)")


def build_epub(path: Path, chapters: list[tuple[str, str]], *, spine: bool = True, licence: bool = True) -> Path:
    book = epub.EpubBook()
    book.set_identifier("moby-test")
    book.set_title("Moby-Dick")
    book.add_author("Herman Melville")
    items = []
    front = epub.EpubHtml(title="Title", file_name="title.xhtml")
    front.content = (
        "<h1>MOBY-DICK</h1><p>*** START OF THE PROJECT GUTENBERG EBOOK MOBY DICK ***</p>"
        "<p>By Herman Melville</p><p>CONTENTS</p>"
    )
    items.append(front)
    for n, (title, text) in enumerate(chapters, start=1):
        item = epub.EpubHtml(title=title, file_name=f"c{n}.xhtml")
        paragraphs = "".join(f"<p>{p}</p>" for p in text.split("\n\n"))
        item.content = f"<h2>{title}</h2>{paragraphs}"
        items.append(item)
    if licence:
        end = epub.EpubHtml(title="Licence", file_name="licence.xhtml")
        end.content = "<p>*** END OF THE PROJECT GUTENBERG EBOOK MOBY DICK ***</p><p>Section 1. Terms of use.</p>"
        items.append(end)
    for item in items:
        book.add_item(item)
    book.toc = items
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *items] if spine else []
    epub.write_epub(str(path), book)
    return path


def novel_chapters(count: int | None = None) -> list[tuple[str, str]]:
    picked = chapters_by_hand(moby_dick())[:count]
    return [
        (title, "\n\n".join(" ".join(p.split()) for p in "\n".join(lines).split("\n\n") if p.strip()))
        for title, lines in picked
    ]


def test_an_epub_built_from_the_novel_gives_its_spine_items_as_chapters(tmp_path, capsys):
    chapters = novel_chapters()
    path = build_epub(tmp_path / "moby.epub", chapters)
    found = read_manuscript(path)
    assert [p.title for p in found.pieces] == [t for t, _ in chapters]
    assert sum(len(p.text.split()) for p in found.pieces) == sum(len(t.split()) for _, t in chapters)
    assert "GUTENBERG" not in found.pieces[0].text and "Terms of use" not in found.pieces[-1].text
    assert found.title == "Moby-Dick" and found.author == "Herman Melville"
    said = "\n".join(found.notes)
    assert "licence footer" in said and "front matter" in said
    assert main(["import", str(path), "--out", str(tmp_path / "run")]) == 0
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        assert store.info().pipeline == "imported" and len(store.chapters()) == len(chapters)


def test_an_epub_with_no_spine_is_refused_in_one_line(tmp_path, capsys):
    path = build_epub(tmp_path / "nospine.epub", novel_chapters(2), spine=False)
    with pytest.raises(InputError, match="no spine"):
        read_manuscript(path)
    assert main(["import", str(path), "--out", str(tmp_path / "run")]) == 2
    assert "no spine" in capsys.readouterr().err and not (tmp_path / "run").exists()


def test_a_broken_epub_is_refused_in_one_line(tmp_path):
    path = tmp_path / "broken.epub"
    path.write_bytes(b"PK\x03\x04 this is not really a zip")
    with pytest.raises(InputError, match="not a readable EPUB"):
        read_manuscript(path)


def test_a_docx_with_heading_styles_or_chapter_lines_splits_into_chapters(tmp_path):
    docx = pytest.importorskip("docx", reason="DOCX import needs python-docx (the manuscript extra)")
    chapters = novel_chapters(3)
    document = docx.Document()
    document.core_properties.title = "Moby-Dick"
    document.add_paragraph("Moby-Dick", style="Title")
    document.add_paragraph("For Nathaniel Hawthorne.")
    for title, text in chapters:
        document.add_heading(title, level=1)
        for paragraph in text.split("\n\n"):
            document.add_paragraph(paragraph)
    document.save(tmp_path / "styled.docx")
    found = read_manuscript(tmp_path / "styled.docx")
    assert [p.title for p in found.pieces] == [t for t, _ in chapters]
    assert [p.text for p in found.pieces] == [t for _, t in chapters]
    assert found.title == "Moby-Dick" and any("front matter" in n for n in found.notes)

    plain = docx.Document()
    for n, (_, text) in enumerate(chapters, start=1):
        plain.add_paragraph(f"Chapter {n}")
        plain.add_paragraph(text.split("\n\n")[0])
    plain.save(tmp_path / "plain.docx")
    assert [p.number for p in read_manuscript(tmp_path / "plain.docx").pieces] == [1, 2, 3]


def test_a_docx_without_python_docx_is_one_line(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "docx", None)
    path = tmp_path / "book.docx"
    path.write_bytes(b"PK\x03\x04")
    with pytest.raises(InputError, match="needs python-docx"):
        read_manuscript(path)
