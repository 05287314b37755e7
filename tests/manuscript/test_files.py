"""Bad input through ``fabula import``: one line, exit 2, nothing written; and the dry run writes nothing."""

from __future__ import annotations

import resource
from pathlib import Path

from agent.cli import main
from agent.manuscript import read_manuscript, read_text
from tests.manuscript.books import moby_dick

CHAPTERS = "Chapter 1\n\nThe boats came in at dusk.\n\nChapter 2\n\nThe café was closed — Zoë wept.\n"


def run_import(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["import", *args])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, tmp_path: Path, source: Path, needle: str, *extra: str) -> str:
    out = tmp_path / "run"
    code, _, err = run_import(capsys, str(source), "--out", str(out), *extra)
    lines = [line for line in err.splitlines() if line.startswith("fabula: error:")]
    assert code == 2, err
    assert len(lines) == 1 and needle in lines[0].replace(str(tmp_path), "TMP"), err  # not in a path
    assert not out.exists()
    return lines[0]


def test_an_empty_file_is_refused(capsys, tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    refused(capsys, tmp_path, tmp_path / "empty.txt", "is empty")
    (tmp_path / "blank.txt").write_text("  \n\n\t\n")
    refused(capsys, tmp_path, tmp_path / "blank.txt", "only white space")


def test_a_binary_file_is_refused(capsys, tmp_path):
    (tmp_path / "image.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 4)
    refused(capsys, tmp_path, tmp_path / "image.txt", "looks like a binary file")
    (tmp_path / "nul.txt").write_bytes(CHAPTERS.encode("utf-8").replace(b" ", b"\x00"))  # valid UTF-8, not text
    refused(capsys, tmp_path, tmp_path / "nul.txt", "looks like a binary file")
    (tmp_path / "book.pdf").write_bytes(b"%PDF-1.7\n" + b"stream\n" * 10)
    refused(capsys, tmp_path, tmp_path / "book.pdf", "PDF")


def test_a_missing_file_or_a_folder_is_refused(capsys, tmp_path):
    refused(capsys, tmp_path, tmp_path / "nothing.txt", "no such file")
    (tmp_path / "folder").mkdir()
    refused(capsys, tmp_path, tmp_path / "folder", "is a folder")


def test_a_200_mb_file_is_refused_from_its_size_before_it_is_read(capsys, tmp_path, monkeypatch):
    big = tmp_path / "huge.txt"
    with open(big, "wb") as handle:  # sparse: no disk used, no time spent
        handle.truncate(200 * 1024 * 1024)
    opened: list[str] = []
    real_open = open

    def watching_open(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr("builtins.open", watching_open)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    line = refused(capsys, tmp_path, big, "200 MiB")
    assert str(read_text.MAX_BYTES // 2**20) in line
    assert str(big) not in opened  # refused from stat alone
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50 * 1024  # KiB: far below 200 MB


def test_text_that_is_not_utf8_is_read_as_windows_1252_and_said_so(capsys, tmp_path):
    source = tmp_path / "old.txt"
    source.write_bytes(CHAPTERS.replace("—", "-").encode("cp1252"))
    code, out, err = run_import(capsys, str(source), "--out", str(tmp_path / "run"), "--dry-run")
    assert code == 0 and "read old.txt as cp1252 (it is not UTF-8)" in err
    assert "2 chapters" in out


def test_text_in_no_encoding_fabula_reads_is_refused_in_one_line(capsys, tmp_path):
    source = tmp_path / "odd.txt"
    source.write_bytes(CHAPTERS.encode("utf-8") + b"\x81\x8d\x8f\x90\x9d")  # undefined in Windows-1252
    refused(capsys, tmp_path, source, "not UTF-8")


def test_an_out_folder_that_exists_is_refused_unless_empty(capsys, tmp_path):
    source = tmp_path / "book.txt"
    source.write_text(CHAPTERS)
    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    code, _, err = run_import(capsys, str(source), "--out", str(full))
    assert code == 2 and "not empty" in err and sorted(p.name for p in full.iterdir()) == ["keep.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run_import(capsys, str(source), "--out", str(empty))[0] == 0
    assert (empty / "run.db").exists()
    assert run_import(capsys, str(source), "--out", str(empty))[0] == 2  # now it holds a run


def test_the_dry_run_lists_chapters_and_words_and_writes_nothing(capsys, tmp_path):
    source = tmp_path / "book.txt"
    source.write_text(CHAPTERS)
    out = tmp_path / "run"
    code, listed, _ = run_import(capsys, str(source), "--out", str(out), "--dry-run")
    assert code == 0 and not out.exists()
    lines = listed.splitlines()
    assert lines[0].split() == ["1", "6", "words", "Chapter", "1"]
    assert lines[1].split()[:3] == ["2", "6", "words"]  # the store's rule (agent.text.count_words), as show says
    assert lines[-1].startswith("2 chapters, 12 words")


def test_title_and_author_given_are_the_books(capsys, tmp_path):
    source = tmp_path / "book.txt"
    source.write_text(CHAPTERS)
    given = ["--title", "Dusk", "--author", "A. Writer"]
    assert run_import(capsys, str(source), "-o", str(tmp_path / "run"), *given)[0] == 0
    assert main(["export", str(tmp_path / "run"), "--format", "md"]) == 0
    exported = capsys.readouterr().out
    assert 'title: "Dusk"' in exported and 'author: "A. Writer"' in exported
    assert "The boats came in at dusk." in exported


def test_a_bad_split_regex_is_refused(capsys, tmp_path):
    source = tmp_path / "book.txt"
    source.write_text(CHAPTERS)
    refused(capsys, tmp_path, source, "not a regular expression", "--split", "([")


def test_the_real_novel_in_windows_1252_reads_as_the_utf8_one(tmp_path):
    text = moby_dick()
    folder = tmp_path
    (folder / "utf8.txt").write_text(text, encoding="utf-8")
    (folder / "cp1252.txt").write_bytes(text.encode("cp1252"))  # as many copies of PG #2701 are
    utf8, cp1252 = read_manuscript(folder / "utf8.txt"), read_manuscript(folder / "cp1252.txt")
    assert cp1252.encoding == "cp1252" and cp1252.notes[0] == "read cp1252.txt as cp1252 (it is not UTF-8)"
    assert [(p.title, p.text) for p in cp1252.pieces] == [(p.title, p.text) for p in utf8.pieces]
