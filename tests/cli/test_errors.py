"""Only fabula's own errors are one-line user errors; anything else is an internal error with a log."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.cli import main, runs_cmd
from agent.errors import InputError


def test_a_bug_is_an_internal_error_with_a_traceback_log(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))

    def broken(args):
        raise ValueError("list index confusion")  # a ValueError from fabula's own code is a bug, not bad input

    monkeypatch.setattr(runs_cmd, "run", broken)
    code = main(["runs", str(tmp_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 70 and len(err) == 1
    assert err[0].startswith("fabula: internal error: ValueError: list index confusion")
    assert "fabula: error:" not in err[0] and "not in your input" in err[0]
    log = Path(re.search(r"the traceback is in (\S+)", err[0]).group(1))
    assert log.is_file() and "Traceback" in log.read_text() and log.is_relative_to(tmp_path / "home")


def test_fabula_errors_are_one_line_with_their_exit_code(monkeypatch, capsys):
    def bad(args):
        raise InputError("--words must be positive\nsecond line never shown")

    monkeypatch.setattr(runs_cmd, "run", bad)
    assert main(["runs", "."]) == 2
    assert capsys.readouterr().err == "fabula: error: --words must be positive\n"


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0 and re.fullmatch(r"fabula \S+\n", capsys.readouterr().out)


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--preset", "no-such-preset", "--dry-run"],
        ["prompt", "hi", "--grammar", "no_such_grammar"],
        ["prompt", "hi", "--backend", "endpoint"],
        ["prompt", "hi", "--endpoint", "ftp://example/v1"],
        ["write", "nst", "--prompt", "x", "--words", "1000", "--set", "nope"],
    ],
)
def test_bad_input_is_a_user_error_not_an_internal_one(argv, capsys, monkeypatch):
    monkeypatch.delenv("FABULA_ENDPOINT", raising=False)
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("fabula: error: "), err
