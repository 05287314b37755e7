"""The book exports: Markdown with front matter, EPUB read back with EbookLib, one-file HTML."""

from __future__ import annotations

import re
import zipfile

import pytest

from agent.cli import main
from agent.store import RunStore
from agent.store.export.markdown import export
from tests.view.runs import quotes

ebooklib = pytest.importorskip("ebooklib")
from ebooklib import epub  # noqa: E402


def test_markdown_has_front_matter_and_one_hash_heading_per_chapter(nst_dir):
    with RunStore.open(nst_dir, readonly=True) as store:
        md = export(store, "md")
        texts = [c.text for c in store.chapters()]
    front, body = md.split("\n---\n\n", 1)
    assert front.startswith("---\n")
    fields = dict(line.split(": ", 1) for line in front.splitlines()[1:])
    assert fields["title"] == '"The Bell Keeper"' and fields["author"] == '"fabula (scripted-author)"'
    assert fields["pipeline"] == '"nst"' and re.fullmatch(r'"\d{4}-\d\d-\d\d"', fields["date"])
    headings = re.findall(r"^# .*$", body, flags=re.M)
    assert headings[0] == "# Chapter 1: Part 1" and headings[2] == "# Chapter 3: Part 3" and len(headings) == 3
    assert headings[1].startswith("# Chapter 2: Part 2 [DEGRADED: ")  # the degraded marker (#13)
    assert not re.search(r"^## ", body, flags=re.M)
    positions = [body.index(t) for t in texts]
    assert positions == sorted(positions)


def test_epub_reads_back_with_title_author_toc_and_one_file_per_chapter(nst_dir, tmp_path):
    out = tmp_path / "keeper.epub"
    assert main(["export", str(nst_dir), "--format", "epub", "-o", str(out)]) == 0
    with zipfile.ZipFile(out) as z:  # a valid EPUB container: mimetype first, stored uncompressed
        first = z.infolist()[0]
        assert first.filename == "mimetype" and z.read(first) == b"application/epub+zip"
    book = epub.read_epub(str(out))
    assert book.get_metadata("DC", "title")[0][0] == "The Bell Keeper"
    assert book.get_metadata("DC", "creator")[0][0] == "fabula (scripted-author)"
    chapters = [i for i in book.get_items_of_type(ebooklib.ITEM_DOCUMENT) if i.get_name().startswith("chapter_")]
    assert [c.get_name() for c in chapters] == ["chapter_001.xhtml", "chapter_002.xhtml", "chapter_003.xhtml"]
    assert [t.title for t in book.toc] == ["Title page", "Chapter 1: Part 1", "Chapter 2: Part 2", "Chapter 3: Part 3"]
    with RunStore.open(nst_dir, readonly=True) as store:
        first, last = quotes(store)
    body1 = chapters[0].get_content().decode()
    body3 = chapters[2].get_content().decode()
    assert first in body1 and last in body3 and last not in body1
    assert "degraded chapter" in chapters[1].get_content().decode()
    spine = [idref for idref, _ in book.spine]
    assert spine[:2] == ["titlepage", "nav"] and len(spine) == 5


def test_magnet_epub_is_one_chapter_of_paragraphs(magnet_dir, tmp_path):
    out = tmp_path / "m.epub"
    assert main(["export", str(magnet_dir), "--format", "epub", "-o", str(out)]) == 0
    book = epub.read_epub(str(out))
    docs = [i for i in book.get_items_of_type(ebooklib.ITEM_DOCUMENT) if i.get_name().startswith("chapter_")]
    assert len(docs) == 1 and book.get_metadata("DC", "title")[0][0] == "Test Story"
    with RunStore.open(magnet_dir, readonly=True) as store:
        assert store.paragraphs()[-1].text.split(".")[0] in docs[0].get_content().decode()


def test_html_export_is_one_self_contained_file(nst_dir, magnet_dir, tmp_path):
    out = tmp_path / "keeper.html"
    assert main(["export", str(nst_dir), "--with-ledger", "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    # nothing is fetched: no script, no stylesheet link, no image or remote URL except SVG's namespace
    assert "<script" not in page and "<link" not in page and "src=" not in page
    assert not re.findall(r"https?://(?!www\.w3\.org/2000/svg)", page)
    with RunStore.open(nst_dir, readonly=True) as store:
        first, last = quotes(store)
    assert first in page and last in page and "Degraded: no draft passed the length gate" in page
    assert 'id="state-3"' in page and "past events" in page and "Tokens per unit" in page
    # a judgment's quote links to its passage inside the same file
    anchor = re.search(r'<a class="quote-link" href="#(q[\d-]+)">', page).group(1)
    assert f'<mark id="{anchor}"' in page
    out2 = tmp_path / "codicil.html"
    assert main(["export", str(magnet_dir), "--with-ledger", "-o", str(out2)]) == 0
    assert 'id="world-graph"' in out2.read_text(encoding="utf-8")


def test_epub_to_a_terminal_is_refused(nst_dir, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    assert main(["export", str(nst_dir), "--format", "epub"]) == 2
    assert "give -o FILE.epub" in capsys.readouterr().err
