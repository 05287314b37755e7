"""The CLI behaves like the tools writers already use (#26 item 6): help on every option and
subcommand, -o/--out wherever a file or folder is written, -q/-v everywhere, shell completion,
a reader that goes away ends the command quietly, and a live line that fits the terminal."""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import build_parser, main, show_cmd
from agent.cli.common import is_command, walk
from agent.cli.progress import ProgressDisplay
from agent.run_context import Event
from agent.store import RunStore

ROOT = Path(__file__).resolve().parents[2]

LEAD_MODEL_GROUPS: set[tuple[str, ...]] = set()
"""Options allowed without help (none: every option has its help)."""

WRITES = {
    ("write", "nst"): ["--prompt", "p", "--words", "500"],
    ("write", "rollsum"): ["--prompt", "p", "--words", "500"],
    ("write", "direct"): ["--prompt", "p", "--words", "500"],
    ("write", "magnet"): ["S.toml"],
    ("write", "single"): ["S.toml"],
    ("batch",): ["--pipeline", "nst"],
    ("fork",): ["RUN", "--at", "1"],
    ("import",): ["FILE"],
    ("export",): ["RUN"],
    ("story", "schema"): [],
    ("eval", "inject"): ["RUN"],
    ("eval", "report"): ["RUN"],
    ("grammars", "export"): [],
}
"""Every command that writes a file or folder, with the other arguments it needs to parse."""


def _tree():
    return list(walk(build_parser()))


def test_every_option_and_subcommand_has_help():
    missing = []
    for path, parser in _tree():
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helped = {choice.dest for choice in action._choices_actions if choice.help}
                missing += [(*path, name) for name in action.choices if name not in helped]
            elif not isinstance(action, argparse._HelpAction) and not (action.help or "").strip():
                flag = action.option_strings[-1] if action.option_strings else action.dest
                if (*path, flag) not in LEAD_MODEL_GROUPS:
                    missing.append((*path, flag))
    assert missing == []
    assert [path for path, parser in _tree() if not (parser.description or "").strip()] == []  # each --help page


def test_every_command_takes_quiet_and_verbose():
    commands = [(path, parser) for path, parser in _tree() if is_command(parser)]
    assert len(commands) > 30
    for path, parser in commands:
        options = parser._option_string_actions
        assert {"-q", "--quiet", "-v", "--verbose"} <= set(options), path
        assert options["-q"].dest == "quiet" and options["-v"].dest == "verbose", path


@pytest.mark.parametrize("command", sorted(WRITES), ids=" ".join)
def test_every_command_that_writes_takes_o_and_out(command):
    parser = build_parser()
    for flag in ("-o", "--out"):
        args = parser.parse_args([*command, *WRITES[command], flag, "target"])
        assert "target" in {str(getattr(args, dest, None)) for dest in ("out", "output")}, (command, flag)


def test_old_spellings_stay_as_aliases():
    parser = build_parser()
    assert parser.parse_args(["export", "RUN", "--output", "f.md"]).output == "f.md"
    assert parser.parse_args(["view", "runs", "--interval", "3"]).poll == 3
    assert parser.parse_args(["watch", "RUN", "--poll", "3"]).interval == 3
    assert parser.parse_args(["write", "nst", "--prompt", "p", "--words", "500", "--quiet"]).quiet


def test_quiet_silences_chatter_and_verbose_shows_the_traceback(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    run = _run(tmp_path)
    assert main(["export", str(run), "-o", str(tmp_path / "a.md")]) == 0
    assert "wrote" in capsys.readouterr().err
    assert main(["export", str(run), "-o", str(tmp_path / "b.md"), "-q"]) == 0
    assert capsys.readouterr().err == "" and (tmp_path / "b.md").is_file()
    assert main(["export", str(run), "-q"]) == 0  # stdout is the story, not chatter: kept
    assert "Lanterns" in capsys.readouterr().out

    def broken(args):
        raise RuntimeError("a bug")

    monkeypatch.setattr(show_cmd, "run", broken)
    assert main(["show", str(run), "-q"]) == 70  # errors still print under -q
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: a bug" in err and "Traceback" not in err
    assert main(["show", str(run), "-v"]) == 70
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_quiet_keeps_warnings_and_the_notes_that_go_with_an_error(monkeypatch, capsys, tmp_path):
    from agent.cli.common import loud

    def talks(args):
        print("resuming at chapter 3", file=sys.stderr)
        print("fabula: warning: listening on 0.0.0.0", file=loud())
        return 0

    monkeypatch.setattr(show_cmd, "run", talks)
    assert main(["show", "RUN", "-q"]) == 0
    assert capsys.readouterr().err == "fabula: warning: listening on 0.0.0.0\n"
    assert main(["show", "RUN"]) == 0
    assert capsys.readouterr().err.count("\n") == 2


def test_completion_scripts_name_every_command(capsys):
    for shell in ("bash", "zsh"):
        assert main(["completion", shell]) == 0
        script = capsys.readouterr().out
        for word in ("resume", "export", "--context-tokens", "--judge-model", "completion"):
            assert word in script, (shell, word)


def test_a_reader_that_goes_away_ends_quietly(tmp_path, monkeypatch):
    run = _run(tmp_path, chapters=40)  # 130 KB of story: more than a pipe holds
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FABULA_HOME": str(tmp_path / "home")}
    # a reader that stops after 10 bytes of a long story, and one gone before the first byte
    for command, reader in (
        (["export", str(run), "--format", "txt"], "head -c 10 >/dev/null"),
        (["show", str(run)], "true"),
        (["runs", str(tmp_path)], "true"),
    ):
        result = subprocess.run(
            ["bash", "-c", f'set -o pipefail; "$@" | {reader}', "sh", sys.executable, "-m", "agent.cli", *command],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            cwd=ROOT,
        )
        assert result.stderr == "", result.stderr
        assert result.returncode in (0, 141), result.returncode

    def flood(args):
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(show_cmd, "run", flood)
    assert main(["show", str(run)]) == 141


def test_the_live_line_fits_80_columns_in_a_writers_words():
    out = io.StringIO()
    display = ProgressDisplay(stream=out, tty=True, width=80)
    big = {
        "words": 41234,
        "target_words": 100000,
        "calls": 1234,
        "prompt_tokens": 98_765_432,
        "cached_prompt_tokens": 90_000_000,
        "completion_tokens": 1_234_567,
        "elapsed_s": 40000,
        "eta_s": 90000,
    }
    events = [
        Event("plan", 0, None, "outline", **big),
        Event("call", 0, None, "plan_outline", **big),
        Event("call", 3, 60, "nst_turn", **big),
        Event("tool", 3, 60, "search", data={"ok": True}, **big),
        Event("draft", 3, 60, None, data={"attempts": 2, "words": 640, "accepted": False}, **big),
        Event("committed", 3, 60, None, data={"words": 1500, "degraded": True}, **big),
    ]
    for event in events:
        display(event)
    lines = [part.rsplit("\r\033[K", 1)[-1] for part in out.getvalue().replace("\n", "\r\033[K").split("\r\033[K")]
    lines = [line for line in lines if line]
    assert len(lines) == len(events)
    assert all(len(line) < 80 for line in lines), [len(line) for line in lines]
    text = "\n".join(lines)
    for words in (
        "planning the outline",
        "chapter 3/60: choosing the next step",
        "chapter 3/60: searching",
        "chapter 3/60: draft 2, 640 words, rejected",
        "41234/100000 words",
    ):
        assert words in text, words
    for internal in ("plan_outline", "nst_turn", " done", "committed"):
        assert internal not in text, internal
    narrow = io.StringIO()
    for event in events:
        ProgressDisplay(stream=narrow, tty=True, width=30)(event)
    cut = narrow.getvalue().replace("\033[K", "").replace("\n", "\r").split("\r")
    assert all(len(line) < 30 for line in cut) and any(line.endswith("…") for line in cut), cut


def test_verbose_keeps_every_calls_line():
    call = Event("call", 2, 5, "nst_prose", words=10)
    for verbose, lines in ((False, 1), (True, 3)):
        log = io.StringIO()
        display = ProgressDisplay(stream=log, tty=False, verbose=verbose)
        for _ in range(3):
            display(call)
        assert log.getvalue().count("chapter 2/5: drafting") == lines


def _run(tmp_path: Path, chapters: int = 2) -> Path:
    store = RunStore.create(
        tmp_path / "run", pipeline="nst", config={"chapters": chapters}, model="m", backend="endpoint", initial_state={}
    )
    store.set_target(chapters)
    for i in range(1, chapters + 1):
        store.commit_chapter(i, f"Title {i}", "Lanterns swung over the harbour. " * 100, state={"after": i})
    store.close()
    return tmp_path / "run"
