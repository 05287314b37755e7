"""The hostile suite, round three (#39): the doors added in the last two rounds (import, outline,
config, repro, view, export) held to the old doors' standard, by class: no hang on a reader of user
text, no unbounded read or inflation, one parser for user numbers, one label rule, no side effect
before the last check, paths that stay where they belong. Each case was seen failing on 45bb0a8."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sqlite3
import time
import tracemalloc
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.cli import main
from agent.errors import InputError
from agent.store import RunStore

FAST = settings(max_examples=60, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture])
"""Every generated input is answered within 2 s (hypothesis fails the example otherwise)."""


@contextlib.contextmanager
def within(seconds: float):
    """A hang is a failure, not a stuck test: SIGALRM ends the block after ``seconds``."""

    def expired(*_):
        raise TimeoutError(f"took over {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse refuses a flag's value
        return int(exc.code or 0)


def one_error(capsys, code: int) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert code in (1, 2) and err and err[-1].startswith("fabula: error: ") and "Traceback" not in "\n".join(err), err
    return err[-1]


def _grid() -> str:
    from agent.repro.grid import GRIDS

    return (
        f'tables = "NstAgent"\nprompts = {json.dumps(str(GRIDS / "smoke-prompts.jsonl"))}\nlengths = [1000]\n'
        '[[methods]]\nname = "NstAgent"\npipeline = "nst"\n'
    )


GRID = _grid()
"""A valid grid, one method, as the cases change it."""


def nst_run(path: Path, chapters: int = 2, *, title: str = "One") -> Path:
    outline = [
        {"id": i, "title": title if i == 1 else f"Ch {i}", "target_words": 600, "description": "d"}
        for i in range(1, chapters + 2)
    ]
    with RunStore.create(
        path, pipeline="nst", config={"words": 1800, "prompt": "p"}, unit_kind="chapter", target_units=chapters + 1
    ) as store:
        store.plans.put("outline", outline)
        store.plans.put("title", "The Bell")
        for i in range(1, chapters + 1):
            store.commit_chapter(i, outline[i - 1]["title"], "The keeper lit the lamp. " * 120, state={})
    return path


# -- hangs: no backtracking pattern on a long line, a time limit on the user's own ------------------------
def test_a_markdown_heading_with_a_long_run_of_blanks_imports_at_once():
    from agent.manuscript.split import split_text

    text = "# Chapter 1" + " " * 5000 + "x\n\nThe sea.\n\n# Chapter 2\n\nThe tide.\n"
    with within(5):
        found = split_text(text, fmt="markdown")
    assert [p.title for p in found.pieces] == ["Chapter 2"]  # a 5,000-character line is no heading...
    assert "x\n\nThe sea." in found.left_out[0].text  # ...and what it starts is kept by the run


@pytest.mark.parametrize(
    "line", ["Chapter 1: A" + " " * 50_000 + "B", "Target: 5" + " " * 50_000 + "x", "Title: T" + "\t " * 30_000 + "U"]
)
def test_the_outline_text_form_reads_a_long_line_at_once(line):
    from agent.nst.plan.form import OutlineFormError, parse

    text = {
        "Chapter": f"Title: T\n\n{line}\nTarget: 600 words\nd\n",
        "Target": f"Chapter 1: A\n{line}\nd\n",
        "Title": f"{line}\n\nChapter 1: A\nTarget: 600 words\nd\n",
    }[line.split(" ")[0].split(":")[0]]
    with within(5), contextlib.suppress(OutlineFormError):
        parse(text)


def test_a_split_pattern_that_backtracks_is_stopped_in_one_line(tmp_path, capsys, monkeypatch):
    from agent.manuscript import split

    monkeypatch.setattr(split, "SPLIT_SECONDS", 0.5)
    source = tmp_path / "book.txt"
    source.write_text(("a" * 40 + "!\n\n") * 3, encoding="utf-8")
    with within(20):
        code = run_cli(["import", str(source), "--out", str(tmp_path / "run"), "--split", "(a|aa)+$"])
    assert "took over 0.5 s" in one_error(capsys, code) and not (tmp_path / "run").exists()


@FAST
@given(st.text(alphabet=" \t\n#:abcIVX1²٣.-—*Chapter", max_size=3000))
def test_every_reader_of_user_text_answers_any_text_in_bounded_time(text):
    from agent.manuscript.split import split_text
    from agent.nst.plan.form import parse

    for read in (lambda t: split_text(t, fmt="markdown"), split_text, parse):
        with contextlib.suppress(InputError):
            read(text)


# -- unbounded reads and inflation -------------------------------------------------------------------------
@pytest.mark.parametrize("source", ["/dev/zero", "fifo"])
def test_outline_file_reads_through_the_one_bounded_reader(source, tmp_path, capsys):
    run = nst_run(tmp_path / "run")
    if source == "fifo":
        source = str(tmp_path / "fifo")
        os.mkfifo(source)
    with within(20):
        code = run_cli(["outline", str(run), "--file", source])
    said = one_error(capsys, code)  # /dev/zero: too large; a FIFO nobody writes to: empty, never a hang
    assert ("cannot read --file" if source == "/dev/zero" else "0 chapters") in said


def zip_bomb(path: Path, inflated: int) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", "application/epub+zip")
        with archive.open("OEBPS/bomb.xhtml", "w", force_zip64=True) as member:
            block = b"\0" * (1 << 20)
            for _ in range(inflated >> 20):
                member.write(block)
    return path


@pytest.mark.parametrize("suffix", [".epub", ".docx"])
def test_an_archive_that_inflates_past_the_cap_is_refused_before_it_is_inflated(suffix, tmp_path, capsys):
    bomb = zip_bomb(tmp_path / f"bomb{suffix}", 80 << 20)
    assert bomb.stat().st_size < 1 << 20
    pytest.importorskip("docx" if suffix == ".docx" else "ebooklib")  # imported before memory is counted
    tracemalloc.start()
    try:
        code = run_cli(["import", str(bomb), "--out", str(tmp_path / "run")])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "zip bomb" in one_error(capsys, code) and peak < 16 << 20


def test_the_total_an_archive_inflates_to_is_capped_too(tmp_path, monkeypatch):
    from agent.manuscript import archive

    monkeypatch.setattr(archive, "MAX_TOTAL_BYTES", 3 << 20)
    path = tmp_path / "many.epub"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as bundle:
        for n in range(4):
            bundle.writestr(f"c{n}.xhtml", b"\0" * (1 << 20))
    with pytest.raises(InputError, match="inflates to over 3 MiB"):
        archive.members(path, "EPUB")


def test_a_grid_of_a_million_cells_is_refused_before_planning(tmp_path):
    from agent.repro.grid import GridError, load_grid

    grid = tmp_path / "huge.toml"
    grid.write_text(
        GRID.replace(
            "lengths = [1000]",
            "lengths = ["
            + ", ".join(str(1000 + i) for i in range(1000))
            + "]\nseeds = ["
            + ", ".join(map(str, range(1000)))
            + "]",
        ),
        encoding="utf-8",
    )
    with within(10), pytest.raises(GridError, match="cells"):
        load_grid(str(grid))


# -- one parser for user numbers ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["²", "٣", "1" * 5000, "99999999999999999999", "-1", "1e3", " 7 ", "+5"])
def test_the_views_numbers_never_reach_the_store_unparsed(value, tmp_path):
    from starlette.testclient import TestClient

    from agent.view.app import create_app

    nst_run(tmp_path / "run")
    client = TestClient(create_app(tmp_path), raise_server_exceptions=False)
    for page in (
        f"/run/run/state?unit={value}",
        f"/run/run/search?q=lamp&k={value}",
        f"/run/run/versions?unit={value}&a={value}",
        f"/run/run/story?find=lamp&at={value}",
    ):
        response = client.get(page)
        assert response.status_code < 500 and "Traceback" not in response.text, (page, response.status_code)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("Chapter ²: A", "expected"),
        ("Chapter 1: A\nTarget: ² words", "needs 'Target: N words'"),
        ("Chapter 1: A\nTarget: " + "9" * 5000 + " words", "from 0 to"),
        ("Chapter " + "1" * 5000 + ": A", "chapter number"),
    ],
)
def test_outline_numbers_are_ascii_digits_with_a_length_bound(line, problem):
    from agent.nst.plan.form import OutlineFormError, parse

    with pytest.raises(OutlineFormError, match=problem):
        parse(f"Title: T\n\n{line}\nTarget: 600 words\nd\n" if "Target" not in line else f"Title: T\n\n{line}\nd\n")


@pytest.mark.parametrize("key", ["²", "1" * 5000, "-5"])
def test_grid_keys_are_numbers_by_the_one_rule(key, tmp_path):
    from agent.repro.grid import GridError, load_grid

    grid = tmp_path / "g.toml"
    grid.write_text(
        GRID.replace("[[methods]]", f'first = 2\nfirst_at = {{ "{key}" = 3 }}\n[[methods]]'), encoding="utf-8"
    )
    with pytest.raises(GridError, match="first_at"):
        load_grid(str(grid))


def test_a_huge_lock_range_is_refused_before_it_is_made(tmp_path, capsys):
    run = nst_run(tmp_path / "run", chapters=3)
    tracemalloc.start()
    try:
        code = run_cli(["reconcile", str(run), "--lock", "1..10000000"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "not written" in one_error(capsys, code) and peak < 32 << 20


@pytest.mark.parametrize(
    ("flag", "value"), [("--max-tokens", str(10**12)), ("--seed", str(2**70)), ("--max-tokens", "²"), ("--seed", "-1")]
)
def test_prompt_numbers_are_checked_before_anything_is_sent(flag, value, capsys, monkeypatch):
    monkeypatch.setenv("FABULA_ENDPOINT", "http://127.0.0.1:9/v1")
    assert run_cli(["prompt", "hi", flag, value]) == 2
    assert flag in capsys.readouterr().err


@pytest.mark.parametrize("form", ["json", "toml"])
def test_deep_nesting_in_an_outline_or_a_grid_is_one_line(form, tmp_path):
    from agent.nst.plan.form import OutlineFormError, parse
    from agent.repro.grid import GridError, load_grid

    if form == "json":
        with pytest.raises(OutlineFormError, match="nests deeper"):
            parse('{"chapters": ' + "[" * 100_000 + "]" * 100_000 + "}")
        return
    grid = tmp_path / "deep.toml"
    grid.write_text("tables = " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(GridError, match="nests deeper"):
        load_grid(str(grid))


# -- one label rule; no side effect before the last check ---------------------------------------------------
def test_titles_and_descriptions_of_an_edited_outline_are_bounded_and_cleaned():
    from agent.nst.plan.form import OutlineFormError, parse

    with pytest.raises(OutlineFormError, match="at most"):
        parse("Title: " + "x" * 1_000_000 + "\n\nChapter 1: A\nTarget: 600 words\nd\n")
    with pytest.raises(OutlineFormError, match="description"):
        parse("Chapter 1: A\nTarget: 600 words\n" + "word " * 4_000_000 + "\n")
    title, chapters = parse(
        "Title: \x1b]0;owned\x07The Bell\x1b[2J\n\nChapter 1: A\x9b\x1b[31m red\nTarget: 600 words\nd\n"
    )
    assert title == "The Bell" and chapters[0]["title"] == "A red"


def test_a_title_can_never_drive_the_terminal_of_outline_or_show(tmp_path, capsys):
    run = nst_run(tmp_path / "run", title="\x1b[2J\x1b]0;pwned\x07Clear")
    assert main(["outline", str(run)]) == 0
    assert main(["show", str(run)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "Clear" in out


def test_a_refused_export_records_no_title(tmp_path, capsys):
    run = nst_run(tmp_path / "run")
    code = run_cli(["export", str(run), "--title", "New Title", "--graph", "json"])
    assert "Magnet" in one_error(capsys, code)
    with RunStore.open(run, readonly=True) as store:
        assert store.plans.get("title") == "The Bell"
    assert main(["export", str(run), "--title", "\x1b[31mNew\x1b[0m Title", "-o", str(tmp_path / "b.md")]) == 0
    with RunStore.open(run, readonly=True) as store:
        assert store.plans.get("title") == "New Title"


def test_a_docx_without_core_properties_is_not_titled_word_document(tmp_path):
    docx = pytest.importorskip("docx")
    from agent.manuscript.read_docx import read_docx

    document = docx.Document()
    document.add_heading("Chapter 1", level=1)
    document.add_paragraph("The keeper lit the lamp.")
    document.save(tmp_path / "full.docx")
    with zipfile.ZipFile(tmp_path / "full.docx") as full, zipfile.ZipFile(tmp_path / "bare.docx", "w") as bare:
        for item in full.infolist():
            data = full.read(item.filename)
            if item.filename == "_rels/.rels":  # no relationship to the core properties either
                data = re.sub(rb"<Relationship [^>]*core-properties[^>]*/>", b"", data)
            if item.filename != "docProps/core.xml":
                bare.writestr(item, data)
    assert read_docx(tmp_path / "bare.docx")[1:] == (None, None)


def test_an_empty_endpoint_flag_is_refused_not_ignored(capsys, monkeypatch):
    monkeypatch.setenv("FABULA_ENDPOINT", "http://127.0.0.1:9/v1")
    assert run_cli(["prompt", "hi", "--endpoint", ""]) == 2
    assert "--endpoint" in capsys.readouterr().err


@pytest.mark.parametrize("column", ["text", "title"])
def test_a_chapter_damaged_into_a_blob_is_damage_in_every_command(column, tmp_path, capsys):
    run = nst_run(tmp_path / "run")
    with sqlite3.connect(run / "run.db") as conn:
        conn.execute(f"UPDATE chapters SET {column} = ? WHERE idx = 1", (b"\xff\xfe\x00The lamp, binary",))
    for argv in (
        ["show", str(run)],
        ["export", str(run)],
        ["search", str(run), "lamp"],
        ["eval", "metrics", str(run)],
        ["fork", str(run), "--at", "1", "--out", str(tmp_path / "f"), "--no-run"],
        ["edit", str(run), "--chapter", "1", "--file", "/etc/hostname"],
    ):
        assert "damaged" in one_error(capsys, run_cli(argv)), argv
    assert not (tmp_path / "f").exists()


def test_a_read_only_file_system_is_said_by_every_command_that_writes(tmp_path, capsys, monkeypatch):
    real = os.statvfs

    class ReadOnly:
        def __init__(self, info):
            self.info = info

        def __getattr__(self, name):
            return os.ST_RDONLY | self.info.f_flag if name == "f_flag" else getattr(self.info, name)

    run = nst_run(tmp_path / "run")
    monkeypatch.setattr(os, "statvfs", lambda path: ReadOnly(real(path)) if str(run) in str(path) else real(path))
    for argv in (
        ["resume", str(run)],
        ["reconcile", str(run)],
        ["outline", str(run), "--file", "/etc/hostname"],
        ["derive", str(run)],
        ["edit", str(run), "--chapter", "1", "--file", "/etc/hostname"],
        ["export", str(run), "--title", "X", "-o", str(tmp_path / "x.md")],
    ):
        assert "read-only file system" in one_error(capsys, run_cli(argv)), argv
    assert not (tmp_path / "x.md").exists()


# -- paths ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["../escape", "a/b", "..", "/abs", ""])
def test_a_grid_name_never_names_a_folder_outside_runs(name, tmp_path):
    from agent.repro.grid import GridError, load_grid

    grid = tmp_path / "g.toml"
    grid.write_text(f"name = {json.dumps(name)}\n" + GRID, encoding="utf-8")
    with pytest.raises(GridError, match="name"):
        load_grid(str(grid))


def test_the_checks_take_no_time_on_a_normal_input(tmp_path):
    from agent.userinput import checked_label, whole_number

    start = time.perf_counter()
    for _ in range(10_000):
        whole_number("12345", low=0, high=10**6, what="n")
        checked_label("Chapter 12: The Storm", what="t")
    assert time.perf_counter() - start < 5
