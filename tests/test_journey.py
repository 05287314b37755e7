"""The writer's road, walked as a writer walks it: through the ``fabula`` command only, in
subprocesses, with no environment variables naming the model (#26).

serve -> write --plan-only -> outline --file (a chapter's title and target changed) -> resume
-> kill -9 mid-chapter -> resume with no flags (the run's own server) -> edit -> fork -> export
EPUB with the planner's title (epubcheck where it is installed). Every exit code is the one
docs/reference.md gives. The whole road runs against the scripted author behind a vLLM-shaped
server; the kill and the no-flag resume run once more on the real CPU vLLM server that
``fabula serve --preset tiny-cpu`` starts (``server`` marker)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from agent.store import RunStore
from agent.testing.author import BOOK_TITLE
from agent.testing.author_server import AuthorServer

ROOT = Path(__file__).resolve().parents[1]
PROMPT = "A lighthouse keeper finds a bell that rings by itself."
DONE, FAILED, BAD_INPUT = 0, 1, 2  # docs/reference.md, "Exit codes"


def clean_env(home: Path) -> dict[str, str]:
    """The environment of a writer's shell: no FABULA_* model settings, a home of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FABULA_")}
    env.update(FABULA_HOME=str(home), FABULA_CONFIG=str(home / "config.toml"), PYTHONPATH=str(ROOT), COLUMNS="100")
    return env


def fabula(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *map(str, args)],
        cwd=ROOT,
        env=env,
        text=True,
        capture_output=True,
        timeout=timeout,
    )


def calls_of(run: Path, unit: int) -> int:
    if not (run / "run.db").exists():
        return 0
    try:
        with RunStore.open(run, readonly=True) as store:
            return store.query("SELECT count(*) FROM llm_calls WHERE unit = ?", (unit,))[0][0]
    except Exception:  # the writer holds its write lock for a moment
        return 0


def kill_mid_chapter(env: dict[str, str], run: Path, unit: int, *, timeout_s: float) -> None:
    """``fabula resume RUN`` in the background, killed with SIGKILL once chapter ``unit`` has made
    a model call (its text not yet committed)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent.cli", "resume", str(run), "-q"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + timeout_s
    while calls_of(run, unit) < 1 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, f"resume ended (exit {proc.returncode}) before chapter {unit} made a call"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with RunStore.open(run, readonly=True) as store:
        assert store.live_status() == "interrupted"
        assert store.info().last_unit == unit - 1


def edit_outline(env: dict[str, str], run: Path, tmp_path: Path, title: str, target: int) -> None:
    printed = fabula(env, "outline", run)
    assert printed.returncode == DONE, printed.stderr
    text = re.sub(r"^Chapter 1: .*$", f"Chapter 1: {title}", printed.stdout, count=1, flags=re.M)
    text = re.sub(r"^Target: \d+ words$", f"Target: {target} words", text, count=1, flags=re.M)
    edited = tmp_path / "outline.txt"
    edited.write_text(text, encoding="utf-8")
    refused = tmp_path / "too-long.txt"
    refused.write_text(text.replace(f"Target: {target} words", "Target: 5000 words"), encoding="utf-8")
    bad = fabula(env, "outline", run, "--file", refused)
    assert bad.returncode == BAD_INPUT and bad.stderr.strip().startswith("fabula: error:")
    assert fabula(env, "outline", run, "--file", edited).returncode == DONE


def check_resumed(run: Path, title: str) -> None:
    """Completed after the kill: every chapter once, chapter 1 written from the edited outline."""
    with RunStore.open(run, readonly=True) as store:
        info = store.info()
        assert info.status == "completed" and info.target_units
        assert [c.index for c in store.chapters()] == list(range(1, info.target_units + 1))  # none lost or twice
        kinds = [r[0] for r in store.query("SELECT kind FROM sessions ORDER BY id")]
        assert kinds == ["start", "outline", "resume", "resume"]  # plan only, the edit, killed, finished
        first = next(c for c in store.ledger.llm_calls() if c.role == "nst_turn" and c.messages)  # chapter 1 opens
        assert f'Write chapter 1: "{title}"' in first.messages[1]["content"]


def check_epub(path: Path, title: str) -> None:
    with zipfile.ZipFile(path) as book:
        package = next(n for n in book.namelist() if n.endswith(".opf"))
        assert f"<dc:title>{title}</dc:title>" in book.read(package).decode()
    command = epubcheck()
    if command:
        checked = subprocess.run([*command, str(path)], capture_output=True, text=True, timeout=300)
        assert checked.returncode == 0, checked.stdout + checked.stderr


def epubcheck() -> list[str] | None:
    """Debian's epubcheck (a jar run with java), where it is installed."""
    found = shutil.which("epubcheck")
    if not found:
        return None
    real = os.path.realpath(found)
    if real.endswith(".jar"):
        return ["java", "-jar", real] if shutil.which("java") else None
    return [found]


def test_the_writers_road_through_the_cli(tmp_path):
    env = clean_env(tmp_path / "home")
    run, fork, book = tmp_path / "keeper", tmp_path / "keeper-b", tmp_path / "keeper.epub"
    with AuthorServer(delay_s=0.2, vllm=True) as server:
        nothing = fabula(env, "write", "nst", "--prompt", PROMPT, "--words", "5", "--endpoint", server.url, "-o", run)
        assert nothing.returncode == BAD_INPUT and not run.exists()
        planned = fabula(
            env,
            "write",
            "nst",
            "--prompt",
            PROMPT,
            "--words",
            "2000",
            "--endpoint",
            server.url,
            "-o",
            run,
            "--plan-only",
        )
        assert planned.returncode == DONE, planned.stderr
        assert f'outline stored: "{BOOK_TITLE}", 2 chapter(s)' in planned.stdout
        edit_outline(env, run, tmp_path, "The Drowned Bell", 900)
        kill_mid_chapter(env, run, 2, timeout_s=60)  # chapter 1 written, chapter 2 under way
        resumed = fabula(env, "resume", run)
        assert resumed.returncode == DONE, resumed.stderr
        assert f"at {server.url}, model scripted-author (endpoint from the run's record)" in resumed.stderr
        check_resumed(run, "The Drowned Bell")
        with RunStore.open(run, readonly=True) as store:
            assert store.chapters()[0].words == 900  # the edited target reached the gate (the author writes it)
        assert fabula(env, "resume", run).returncode == DONE  # completed: nothing to do
        new_text = tmp_path / "chapter1.md"
        new_text.write_text(
            "Zebulon rowed out to the drowned chapel at dawn and found the bell wrapped in a torn "
            "sail. He carried it back to the lighthouse without a word to anyone.",
            encoding="utf-8",
        )
        edited = fabula(env, "edit", run, "--chapter", "1", "--file", new_text)
        assert edited.returncode == DONE, edited.stderr
        forked = fabula(env, "fork", run, "--at", "1", "-o", fork)
        assert forked.returncode == DONE, forked.stderr
        exported = fabula(env, "export", fork, "--format", "epub", "-o", book)
        assert exported.returncode == DONE, exported.stderr
    check_epub(book, BOOK_TITLE)
    gone = fabula(env, "resume", tmp_path / "no-such-run")
    assert gone.returncode == BAD_INPUT and gone.stderr.count("\n") == 1


@pytest.mark.server
@pytest.mark.slow  # 401 s in CI (#35): .ci/scheduled runs it; CI keeps the real server's stories
# (tests/nst/test_server.py) and this road on a scripted server (test_the_writers_road_through_the_cli)
def test_kill_and_resume_with_no_flags_on_the_real_cpu_server(vllm_server, tmp_path):
    env = clean_env(tmp_path / "home")
    env["FABULA_HOME"] = os.environ.get("FABULA_HOME") or str(Path.home() / ".cache" / "fabula")  # the model
    run, book = tmp_path / "keeper", tmp_path / "keeper.epub"
    planned = fabula(
        env,
        "write",
        "nst",
        "--prompt",
        PROMPT,
        "--words",
        "500",
        "--endpoint",
        vllm_server.endpoint,
        "-o",
        run,
        "--plan-only",
        "--set",
        "max_turns=6",
        timeout=900,
    )  # turns bounded: CI's time
    assert planned.returncode == DONE, planned.stderr
    assert "profile small for the tiny model" in planned.stderr  # --profile auto on a 135M model
    with RunStore.open(run, readonly=True) as store:
        title = store.plans.get("title")
        target = store.plans.get("outline")[0]["target_words"]
    edit_outline(env, run, tmp_path, "The Drowned Bell", target)
    kill_mid_chapter(env, run, 1, timeout_s=600)
    resumed = fabula(env, "resume", run, timeout=1800)
    assert resumed.returncode == DONE, resumed.stderr
    assert f"at {vllm_server.endpoint}, model {vllm_server.model} (endpoint from the run's record)" in resumed.stderr
    check_resumed(run, "The Drowned Bell")
    with RunStore.open(run, readonly=True) as store:
        assert store.info().config["profile"] == "small"
    exported = fabula(env, "export", run, "--format", "epub", "-o", book)
    assert exported.returncode == DONE, exported.stderr
    check_epub(book, title)
