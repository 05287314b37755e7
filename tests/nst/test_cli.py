"""``fabula write nst|rollsum|direct`` as a user runs it: bad input, a whole run, SIGKILL and resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.cli import main
from agent.store import RunStore
from agent.testing.author_server import AuthorServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def server():
    s = AuthorServer()
    yield s
    s.close()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--prompt", "   ", "--words", "1000"], "prompt is empty"),
        (["--prompt", "x", "--words", "100"], "between 500 and 300000"),
        (["--prompt", "x", "--words", "400000"], "between 500 and 300000"),
        (["--prompt-file", "/nonexistent/p.txt", "--words", "1000"], "cannot read --prompt-file"),
        (["--prompts", "PROMPTS", "--id", "999999", "--words", "1000"], "no prompt with id 999999"),
        (["--prompts", "PROMPTS", "--words", "1000"], "--prompts needs --id"),
        (["--prompt", "x", "--words", "1000", "--set", "bogus=1"], "unknown setting 'bogus'"),
        (["--prompt", "x", "--words", "1000", "--endpoint", "http://127.0.0.1:9/v1"], "cannot reach the server"),
    ],
)
def test_bad_input_is_one_line_and_leaves_nothing(tmp_path, capsys, argv, message):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": 7, "prompt": "a story"}) + "\n")
    argv = [str(prompts) if a == "PROMPTS" else a for a in argv]
    out = tmp_path / "run"
    code = main(["write", "nst", *argv, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and message in err[0]
    assert not out.exists()


def test_prompt_set_and_whole_run_through_a_server(tmp_path, server, capsys, monkeypatch):
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"id": 3, "prompt": "other"}) + "\n" + json.dumps({"id": 7, "prompt": "a bell"}))
    code = main(
        [
            "write",
            "nst",
            "--prompts",
            str(prompts),
            "--id",
            "7",
            "--words",
            "1000",
            "--out",
            str(tmp_path / "run"),
            "--endpoint",
            server.url,
            "--quiet",
            "--temperature",
            "0.5",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "nst: completed, 2 of 2 chapter(s), 1000 words" in out and "first-attempt gate pass: 2/2" in out
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        config = store.info().config
        assert config["prompt"] == "a bell" and config["prompt_id"] == "7" and config["temperature"] == 0.5
        assert config["llm"]["backend"] == "endpoint"
    assert list((tmp_path / "home" / "plans").glob("*.json"))
    for writer in ("rollsum", "direct"):
        code = main(
            [
                "write",
                writer,
                "--prompts",
                str(prompts),
                "--id",
                "7",
                "--words",
                "1000",
                "--out",
                str(tmp_path / writer),
                "--endpoint",
                server.url,
                "--quiet",
            ]
        )
        assert code == 0 and f"{writer}: completed" in capsys.readouterr().out


def test_sigkill_mid_chapter_then_resume(tmp_path):
    server = AuthorServer(delay_s=0.15)
    env = {**os.environ, "FABULA_HOME": str(tmp_path / "home")}
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable,
        "-m",
        "agent.cli",
        "write",
        "nst",
        "--prompt",
        "a bell rings",
        "--words",
        "3000",
        "--out",
        str(run_dir),
        "--endpoint",
        server.url,
        "--quiet",
    ]
    try:
        process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if _in_flight_chapter_2(run_dir):
                break
            time.sleep(0.05)
        else:
            process.kill()
            pytest.fail("the run never reached chapter 2: " + process.stderr.read().decode()[-500:])
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        with RunStore.open(run_dir, readonly=True) as store:
            assert store.info().last_unit == 1 and store.live_status() == "interrupted"
        resumed = subprocess.run(
            [sys.executable, "-m", "agent.cli", "resume", str(run_dir), "--endpoint", server.url],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert resumed.returncode == 0, resumed.stderr
        with RunStore.open(run_dir, readonly=True) as store:
            chapters = store.chapters()
            assert [c.index for c in chapters] == [1, 2, 3] and store.info().status == "completed"
            assert all(c.version == 1 and c.words == 1000 for c in chapters)
            count = store.query("SELECT count(*) FROM chapters")[0][0]
            assert count == 3
    finally:
        server.close()


def _in_flight_chapter_2(run_dir: Path) -> bool:
    """True once a tool call of chapter 2 is recorded (chapter 1 committed, 2 under way)."""
    db = run_dir / "run.db"
    if not db.exists():
        return False
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.1)
        try:
            return conn.execute("SELECT count(*) FROM tool_calls WHERE unit = 2").fetchone()[0] > 0
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def test_a_context_too_small_stops_in_one_line_keeps_the_run_and_resumes_when_raised(
    tmp_path, server, capsys, monkeypatch
):
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    run_dir = tmp_path / "run"
    code = main(
        [
            "write",
            "nst",
            "--prompt",
            "a bell",
            "--words",
            "1000",
            "--out",
            str(run_dir),
            "--endpoint",
            server.url,
            "--quiet",
            "--context-tokens",
            "1024",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and "context of 1024 tokens is too small" in err[-1] and "fabula resume" in err[-1]
    assert run_dir.exists()  # its ledger is kept: the planner's calls were paid for
    assert main(["show", str(run_dir), "-v"]) == 0  # the context is a detail of how it was written: -v
    shown = capsys.readouterr().out
    assert (
        "context   1024 tokens (from the setting context_tokens); token counts estimated from the characters" in shown
    )
    assert main(["resume", str(run_dir), "--endpoint", server.url, "--set", "context_tokens=8192", "--force"]) == 0
    capsys.readouterr()
    assert main(["show", str(run_dir), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "completed" and summary["context"]["context_tokens"] == 8192
    with RunStore.open(run_dir, readonly=True) as store:
        assert all(c.prompt_tokens + c.max_tokens <= 8192 for c in store.ledger.llm_calls())


def test_degraded_chapters_are_flagged_in_show_and_export(tmp_path, capsys):
    from agent.nst.config import NST_DEFAULTS

    store = RunStore.create(tmp_path / "run", pipeline="nst", config={**NST_DEFAULTS, "prompt": "p", "words": 1000})
    store.commit_chapter(1, "Fine", "All good.", state={})
    store.commit_chapter(
        2, "Short", "Too short.", state={}, degraded=True, degraded_reason="no draft passed the length gate in 50 turns"
    )
    store.close()
    assert main(["export", str(tmp_path / "run"), "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert "# Chapter 1: Fine\n\nAll good." in md
    assert "# Chapter 2: Short [DEGRADED: no draft passed the length gate in 50 turns]\n\nToo short." in md
    assert main(["show", str(tmp_path / "run")]) == 0
    assert "degraded  chapter 2: no draft passed" in capsys.readouterr().out
