"""The CLI helps a writer (#36): ``fabula`` alone prints the commands grouped by what a writer does,
and a mistyped command is answered with the closest one. Run as a writer runs it: ``python -m agent.cli``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from agent.cli import _commands, build_parser
from agent.cli.command_groups import GROUPS

ROOT = Path(__file__).resolve().parents[2]


def fabula(*argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *argv], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT
    )


def test_fabula_alone_prints_the_commands_grouped_with_write_first():
    done = fabula()
    assert done.returncode == 0, done.stderr
    out = done.stdout
    titles = [
        "write and revise:",
        "read and export:",
        "models and servers:",
        "research and evaluation:",
        "developer tools:",
    ]
    assert [out.index(t) for t in titles] == sorted(out.index(t) for t in titles)
    group = out[out.index("write and revise:") : out.index("read and export:")]
    assert group.splitlines()[1].split()[0] == "write" and "  reconcile " in group
    assert "fabula write nst --prompt" in out and "required" not in done.stderr


def test_every_command_is_in_exactly_one_group():
    grouped = [name for _, names in GROUPS for name in names]
    assert sorted(grouped) == sorted(_commands(build_parser())) and len(set(grouped)) == len(grouped)


def test_a_mistyped_command_is_answered_with_did_you_mean():
    done = fabula("wrte", "nst")
    assert done.returncode == 2
    assert done.stderr.strip() == "fabula: error: 'wrte' is not a fabula command; did you mean write?"
    assert "fabula --help lists them" in fabula("zzzzzz").stderr


def test_view_on_a_busy_port_says_to_use_another_with_port(tmp_path):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = fabula("view", str(tmp_path), "--port", str(port))
    assert done.returncode == 1
    assert f"port {port} is in use" in done.stderr and f"--port {port + 1}" in done.stderr


def test_sigterm_mid_write_says_so_and_leaves_a_run_that_resumes(tmp_path):
    import signal
    import time

    from agent.store import RunStore
    from agent.testing.author_server import AuthorServer
    from tests.test_journey import PROMPT, calls_of, clean_env

    env = clean_env(tmp_path / "home")
    run = tmp_path / "keeper"
    with AuthorServer(delay_s=0.2, vllm=True) as server:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agent.cli",
                "write",
                "nst",
                "--prompt",
                PROMPT,
                "--words",
                "2000",
                "--endpoint",
                server.url,
                "-o",
                str(run),
            ],
            cwd=ROOT,
            env=env,
            text=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while calls_of(run, 2) < 1 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        err = proc.communicate(timeout=60)[1]
        assert proc.returncode == 143, err
        last = err.strip().splitlines()[-1]
        assert (
            last == f"fabula: stopped (SIGTERM); every chapter committed so far is kept: fabula resume {run} "
            "continues it"
        )
        with RunStore.open(run, readonly=True) as store:
            assert store.live_status() != "running" and store.info().last_unit == 1
        resumed = fabula_env(env, "resume", str(run))
        assert resumed.returncode == 0, resumed.stderr
    with RunStore.open(run, readonly=True) as store:
        assert [c.index for c in store.chapters()] == [1, 2]


def fabula_env(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *argv], capture_output=True, text=True, env=env, timeout=300, cwd=ROOT
    )


def test_a_long_model_call_beats_with_elapsed_time(tmp_path, monkeypatch, capsys):
    from agent.cli import main
    from agent.llm import heartbeat
    from agent.testing.author_server import AuthorServer

    monkeypatch.setattr(heartbeat, "EVERY_S", 0.3)
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    for name in ("FABULA_ENDPOINT", "FABULA_MODEL"):
        monkeypatch.delenv(name, raising=False)
    with AuthorServer(delay_s=1.2, vllm=True) as server:
        code = main(["prompt", "Say one word.", "--endpoint", server.url])
    err = capsys.readouterr().err
    assert code == 0, err
    beats = [line for line in err.splitlines() if line.startswith("fabula: still ")]
    assert beats and re.fullmatch(r"fabula: still answering: \d+ s(, \d+ tokens so far)?", beats[0]), beats
    assert not heartbeat.LISTENERS  # the command's listener is gone with it


def test_continue_takes_prompt_as_write_fork_and_sequel_do():
    args = build_parser().parse_args(["continue", "runs/keeper", "--words", "300", "--prompt", "The bell again."])
    assert args.premise == "The bell again."
    for command in (["sequel", "runs/keeper", "--out", "runs/two"],):
        assert build_parser().parse_args([*command, "--prompt", "x"]).prompt == "x"
