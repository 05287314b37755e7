"""A ``fabula batch`` process killed with SIGKILL mid-way, then ``fabula batch resume``: every
story completed exactly once, no unit lost or written twice, stories in flight continued from
their last committed chapter."""

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

from agent.batch.store import BatchStore
from agent.store import NotARunError, RunStore
from agent.testing.author_server import AuthorServer
from tests.batch.folders import story_dir
from tests.conftest import ctrl_c_reaches

ROOT = Path(__file__).resolve().parents[2]


def _rows(folder: Path) -> list[tuple[str, str, int]]:
    db = folder / "batch.db"
    if not db.exists():
        return []
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.1)
        try:
            return conn.execute("SELECT key, status, units FROM stories ORDER BY seq").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return []


def _hold_when_part_way(server: AuthorServer, out: Path, process: subprocess.Popen, *, completed: bool = True) -> None:
    """Hold every author call once a story is part-way (and, with ``completed``, another one done),
    and return when both writers wait on a held call and that still holds: where each story is is
    then known, not raced against the batch (the kill or Ctrl-C lands on two waiting calls)."""

    def part_way() -> bool:
        rows = _rows(out)
        return (not completed or any(s == "completed" for _, s, _ in rows)) and any(
            s == "running" and u >= 1 for _, s, u in rows
        )

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if part_way():
            server.gate.clear()
            while time.monotonic() < deadline and server.waiting < 2 and process.poll() is None:
                time.sleep(0.01)
            if server.waiting >= 2 and part_way():
                return
            server.gate.set()  # a story finished meanwhile: let it go on and look again
        time.sleep(0.01)
    process.kill()
    _, err = process.communicate()
    pytest.fail(f"the batch never got part-way (rows {_rows(out)}): {(err or b'')[-800:]!r}")


def test_sigkill_mid_batch_then_resume_loses_and_duplicates_nothing(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(
        "\n".join(json.dumps({"id": i, "prompt": f"Story {i}: a bell rings at sea."}) for i in range(1, 6)) + "\n"
    )
    server = AuthorServer(delay_s=0.02)
    env = {**os.environ, "FABULA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    out = tmp_path / "batch"
    cmd = [
        sys.executable,
        "-m",
        "agent.cli",
        "batch",
        "--pipeline",
        "nst",
        "--prompts",
        str(prompts),
        "--words",
        "1500",
        "--out",
        str(out),
        "--concurrency",
        "2",
        "--endpoint",
        server.url,
        "--quiet",
    ]
    try:
        process = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _hold_when_part_way(server, out, process)  # both writers wait on a call: the kill lands there
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
        server.gate.set()

        with BatchStore.open(out, readonly=True) as db:
            before = {r.key: r for r in db.stories()}
        done_before = [k for k, r in before.items() if r.status == "completed"]
        in_flight = [k for k, r in before.items() if r.status == "running"]
        assert done_before and in_flight and all(before[k].live_status == "interrupted" for k in in_flight)
        chapters_before: dict[str, dict[int, str]] = {}
        finished_before: dict[str, bool] = {}  # a run may finish just before the batch records it
        for key in in_flight + done_before:
            try:
                with RunStore.open(story_dir(out, key), readonly=True) as store:
                    chapters_before[key] = {c.index: c.text for c in store.chapters()}
                    finished_before[key] = store.info().status == "completed"
            except NotARunError:  # killed while its run was being created: it starts again
                assert key in in_flight
                chapters_before[key], finished_before[key] = {}, False
        assert any(len(chapters_before[k]) >= 1 for k in in_flight)

        resumed = subprocess.run(
            [sys.executable, "-m", "agent.cli", "batch", "resume", str(out), "--endpoint", server.url, "--quiet"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert resumed.returncode == 0 and "5 of 5 stories completed" in resumed.stdout, (
            resumed.stdout[-1500:] + resumed.stderr[-1500:]
        )
    finally:
        server.close()

    with BatchStore.open(out, readonly=True) as db:
        after = {r.key: r for r in db.stories()}
    assert sorted(after) == ["1", "2", "3", "4", "5"]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == sorted(r.run_dir for r in after.values())
    for key, row in after.items():
        assert row.status == "completed" and row.error is None
        with RunStore.open(story_dir(out, key), readonly=True) as store:
            chapters = store.chapters()
            assert store.info().status == "completed"
            units = store.info().target_units
            assert units >= 2 and [c.index for c in chapters] == list(range(1, units + 1))
            assert store.query("SELECT count(*) FROM chapters")[0][0] == units  # no unit written twice
            assert all(c.version == 1 for c in chapters)
            assert row.units == units and row.words == store.words_written() == 1500
            sessions = [r[0] for r in store.query("SELECT kind FROM sessions ORDER BY id")]
            if key in done_before or finished_before.get(key):  # completed before the kill: not written again
                assert sessions == ["start"] and row.attempts == (1 if key in done_before else 2)
            elif key in in_flight and chapters_before[key]:  # continued from its last committed chapter, unchanged
                assert sessions == ["start", "resume"] and row.attempts == 2
                assert {c.index: c.text for c in chapters if c.index in chapters_before[key]} == chapters_before[key]


def test_ctrl_c_stops_every_story_cleanly_and_resume_completes(tmp_path):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("\n".join(json.dumps({"id": i, "prompt": f"Story {i}: a bell rings."}) for i in range(1, 5)))
    server = AuthorServer(delay_s=0.02)
    env = {**os.environ, "FABULA_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    out = tmp_path / "batch"
    cmd = [
        sys.executable,
        "-m",
        "agent.cli",
        "batch",
        "--pipeline",
        "nst",
        "--prompts",
        str(prompts),
        "--words",
        "1500",
        "--out",
        str(out),
        "--concurrency",
        "2",
        "--endpoint",
        server.url,
    ]
    try:
        process = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=ctrl_c_reaches
        )
        _hold_when_part_way(server, out, process, completed=False)  # the batch cannot end before Ctrl-C
        process.send_signal(signal.SIGINT)
        time.sleep(0.5)
        server.gate.set()  # the calls in flight are answered; each story stops at its next call
        _, err = process.communicate(timeout=60)
        assert process.returncode == 130, err[-800:]
        assert "stopping: " in err and " at their next model call (Ctrl-C again to leave at once)" in err
        assert f"every story is resumable: fabula batch resume {out}" in err
        with BatchStore.open(out, readonly=True) as db:
            rows = db.stories()
        statuses = [r.status for r in rows]
        assert statuses.count("stopped") >= 1 and set(statuses), err
        assert set(statuses) <= {"stopped", "pending", "completed"}, err[-3000:]
        for row in rows:
            if row.status == "stopped":  # its run ended its session cleanly, not left running
                with RunStore.open(out / row.run_dir, readonly=True) as store:
                    assert store.info().status == "stopped"
                    assert store.query("SELECT count(*) FROM sessions WHERE ended_at IS NULL")[0][0] == 0
        resumed = subprocess.run(
            [sys.executable, "-m", "agent.cli", "batch", "resume", str(out), "--quiet"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert resumed.returncode == 0 and "4 of 4 stories completed" in resumed.stdout, resumed.stderr[-800:]
    finally:
        server.close()
