"""A run killed with SIGKILL in the middle of a timestep, then `fabula resume`: no step lost or duplicated."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from agent.store import RunStore

SCRIPT = Path(__file__).with_name("scripted_run.py")


def _last_unit(run_dir: Path) -> int:
    try:
        with RunStore.open(run_dir, readonly=True) as store:
            return store.info().last_unit
    except Exception:
        return 0


def test_sigkill_mid_step_then_resume(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "start", str(run_dir), "0.02"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while _last_unit(run_dir) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    time.sleep(0.1)  # well inside step 3 or 4 (each step makes ~10 calls of 20 ms)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    with RunStore.open(run_dir, readonly=True) as store:
        killed_at = store.info().last_unit
        calls_in_flight = store.query("SELECT count(*) FROM llm_calls WHERE unit = ?", (killed_at + 1,))[0][0]
        before = {s["step"]: s["record"] for s in store.steps()}
        assert store.live_status() == "interrupted"
    assert killed_at >= 2 and calls_in_flight > 0  # killed mid-step, with calls of the lost step on record

    done = subprocess.run(
        [sys.executable, str(SCRIPT), "resume", str(run_dir)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    with RunStore.open(run_dir, readonly=True) as store:
        info = store.info()
        steps = store.steps()
        assert info.status == "completed"
        assert [s["step"] for s in steps] == list(range(1, info.last_unit + 1))
        assert info.last_unit > killed_at
        assert {s["step"]: s["record"] for s in steps if s["step"] <= killed_at} == before
        assert [p.step for p in store.paragraphs()] == sorted(p.step for p in store.paragraphs())
        assert len({(p.step, p.seq) for p in store.paragraphs()}) == len(store.paragraphs())
        sessions = [r[0] for r in store.query("SELECT kind FROM sessions ORDER BY id")]
        assert sessions == ["start", "resume"]
