"""The files a writer sends (#36): the format from the file's extension (or a one-line refusal), a DOCX
in standard manuscript format opened with python-docx, an EPUB with a title page and the planned titles
checked by epubcheck, an HTML page for a reader, and the titles set in ``fabula outline`` reaching the
Book and Outline pages and every export. Through the CLI, the scripted author as the model."""

from __future__ import annotations

import re
import subprocess
import zipfile

import pytest

from agent import pipelines
from agent.cli import main
from agent.store import RunStore
from agent.testing.author import Author
from tests.test_journey import epubcheck

docx = pytest.importorskip("docx")
pytest.importorskip("ebooklib")

PROMPT = "A lighthouse keeper finds a bell that rings for ships that sank a hundred years ago."
RENAMED = "The Drowned Bell"


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    """A two-chapter book whose first chapter was renamed in ``fabula outline`` before it was written."""
    folder = tmp_path_factory.mktemp("desk")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FABULA_HOME", str(folder / "home"))
        patch.setattr(pipelines.LLMOptions, "open", lambda self, store=None: Author())
        run = str(folder / "bell")
        assert (
            main(["write", "nst", "--prompt", PROMPT, "--words", "1000", "--out", run, "--quiet", "--plan-only"]) == 0
        )
        with RunStore.open(run, readonly=True) as store:
            assert store.plans.get("outline")[0]["title"] == "Part 1"
        edited = folder / "outline.txt"
        rename_chapter_one(run, edited)
        assert main(["resume", run, "--quiet"]) == 0
        assert main(["export", run, "--author", "Ines Marlow", "-o", str(folder / "first.md")]) == 0
    return run


def rename_chapter_one(run: str, path) -> None:
    """``fabula outline RUN`` printed, chapter 1 renamed, read back with ``--file``."""
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["outline", run]) == 0
    path.write_text(printed.getvalue().replace("Chapter 1: Part 1", f"Chapter 1: {RENAMED}"), encoding="utf-8")
    assert main(["outline", run, "--file", str(path)]) == 0


def test_the_extension_names_the_format_so_book_docx_is_a_docx(book, tmp_path, capsys):
    for name, check in (
        ("book.docx", zipfile.is_zipfile),
        ("book.epub", zipfile.is_zipfile),
        ("book.html", lambda p: p.read_text().startswith("<!doctype html>")),
        ("book.txt", lambda p: not p.read_text().startswith("---")),
        ("book.md", lambda p: p.read_text().startswith("---\n")),
    ):
        path = tmp_path / name
        assert main(["export", book, "-o", str(path)]) == 0, name
        assert check(path), name
    assert "a DOCX in manuscript format" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, said",
    [
        (["-o", "book.epub", "--format", "md"], "-o book.epub says epub but --format says md"),
        (["-o", "book.pages"], "cannot tell the format of book.pages ('.pages')"),
        (["-o", "book"], "cannot tell the format of book (no extension)"),
    ],
)
def test_an_extension_that_disagrees_or_is_unknown_is_refused_in_one_line(
    book, tmp_path, monkeypatch, capsys, argv, said
):
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["export", book, *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0]
    assert not list(tmp_path.iterdir())  # nothing written


def test_the_docx_is_a_manuscript_title_page_one_chapter_a_page_double_spaced(book, tmp_path):
    from docx.enum.text import WD_LINE_SPACING

    path = tmp_path / "bell.docx"
    assert main(["export", book, "-o", str(path)]) == 0
    document = docx.Document(str(path))
    texts = [p.text for p in document.paragraphs]
    with RunStore.open(book, readonly=True) as store:
        words = sum(c.words for c in store.chapters())
        chapters = store.chapters()
    assert re.fullmatch(r"Ines Marlow\tabout [\d,]+ words", texts[0])
    assert abs(int(re.search(r"about ([\d,]+)", texts[0]).group(1).replace(",", "")) - words) <= 50
    assert "The Bell Keeper" in texts and "by Ines Marlow" in texts
    headings = [p.text for p in document.paragraphs if p.style.name == "Heading 1"]
    assert headings == [f"Chapter 1: {RENAMED}", "Chapter 2: Part 2"]
    breaks = document.element.body.xml.count('w:type="page"')
    assert breaks == len(chapters)  # each chapter starts a page (the title page is the first)
    assert document.styles["Normal"].paragraph_format.line_spacing_rule == WD_LINE_SPACING.DOUBLE
    assert document.styles["Normal"].font.name == "Times New Roman"
    body = [p for p in document.paragraphs if p.text and p.text in chapters[0].text.replace("\n", " ")]
    assert body and all(p.paragraph_format.first_line_indent for p in body)
    header = document.sections[0].header.paragraphs[0]
    assert header.text.startswith("Marlow / THE BELL KEEPER / ") and "PAGE" in header._p.xml
    assert document.sections[0].different_first_page_header_footer  # no running header on the title page
    assert texts[-1] == "END"


def test_the_epub_has_a_title_page_the_planned_titles_and_passes_epubcheck(book, tmp_path):
    path = tmp_path / "bell.epub"
    assert main(["export", book, "-o", str(path)]) == 0
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        title = z.read(next(n for n in names if n.endswith("title.xhtml"))).decode()
        nav = z.read(next(n for n in names if n.endswith("nav.xhtml"))).decode()
        first = z.read(next(n for n in names if n.endswith("chapter_001.xhtml"))).decode()
    assert "The Bell Keeper" in title and "Ines Marlow" in title
    assert f"Chapter 1: {RENAMED}" in nav and f"<h1>Chapter 1: {RENAMED}</h1>" in first
    command = epubcheck()
    if command is None:
        pytest.skip("epubcheck is not installed (scripts/setup installs it)")
    checked = subprocess.run([*command, str(path)], capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_html_is_for_a_reader_and_the_ledger_only_on_request(book, tmp_path):
    plain, full = tmp_path / "bell.html", tmp_path / "bell-ledger.html"
    assert main(["export", book, "-o", str(plain)]) == 0
    assert main(["export", book, "--with-ledger", "-o", str(full)]) == 0
    page = plain.read_text(encoding="utf-8")
    assert 'id="author">Ines Marlow<' in page and f"Chapter 1: {RENAMED}" in page
    assert "Call ledger" not in page and " calls · " not in page and "tokens" not in page
    ledger = full.read_text(encoding="utf-8")
    assert "Call ledger" in ledger and "Ines Marlow" in ledger
    assert ledger.index(f"Chapter 1: {RENAMED}") < ledger.index("Call ledger")  # the story first


def test_the_planned_titles_reach_the_book_and_outline_pages(book):
    pytest.importorskip("starlette")
    from pathlib import Path

    from starlette.testclient import TestClient

    from agent.view.app import create_app

    run = Path(book)
    client = TestClient(create_app(run.parent))
    story = client.get(f"/run/{run.name}/story").text
    outline = client.get(f"/run/{run.name}/outline").text
    assert f"Chapter 1: {RENAMED}" in story and "Chapter 2: Part 2" in story
    assert RENAMED in outline and "Things happen in part 1." in outline  # the planned title and summary


def test_after_an_edit_the_cli_and_the_versions_page_both_say_reconcile(book, tmp_path, monkeypatch, capsys):
    pytest.importorskip("starlette")
    import shutil
    from pathlib import Path

    from starlette.testclient import TestClient

    from agent.view.app import create_app

    run = tmp_path / "runs" / "edited"
    shutil.copytree(book, run)
    with RunStore.open(run, readonly=True) as store:
        text = store.chapter(1).text
    changed = tmp_path / "chapter1.txt"
    changed.write_text(text.replace(".", ", and the bell rang.", 1), encoding="utf-8")
    capsys.readouterr()
    assert (
        main(
            [
                "edit",
                str(run),
                "--chapter",
                "1",
                "--file",
                str(changed),
                "--no-rederive",
                "--title",
                "The Keeper's Daughter",
            ]
        )
        == 0
    )
    assert f"next: fabula reconcile {run}" in capsys.readouterr().err
    assert main(["export", str(run), "--format", "md"]) == 0
    assert "# Chapter 1: The Keeper's Daughter\n" in capsys.readouterr().out  # a title edited by hand heads it
    client = TestClient(create_app(Path(run).parent))
    for page in ("versions", "story"):
        shown = client.get(f"/run/edited/{page}").text
        assert f"fabula reconcile {run}" in shown and "fabula fork RUN" not in shown, page


def test_runs_says_planned_for_an_outline_alone_and_counts_stale_chapters(book, tmp_path, monkeypatch, capsys):
    import shutil

    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None: Author())
    shutil.copytree(book, tmp_path / "runs" / "edited")
    with RunStore.open(tmp_path / "runs" / "edited", readonly=True) as store:
        text = store.chapter(1).text
    (tmp_path / "c1.txt").write_text(text + "\n\nThe bell rang once more.", encoding="utf-8")
    assert (
        main(
            [
                "edit",
                str(tmp_path / "runs" / "edited"),
                "--chapter",
                "1",
                "--file",
                str(tmp_path / "c1.txt"),
                "--no-rederive",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "write",
                "nst",
                "--prompt",
                PROMPT,
                "--words",
                "1000",
                "--out",
                str(tmp_path / "runs" / "plan"),
                "--quiet",
                "--plan-only",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["runs", str(tmp_path / "runs")]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "completed, 1 stale" in lines["edited"]
    assert " planned " in lines["plan"] and "stopped" not in lines["plan"]
