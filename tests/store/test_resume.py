"""Resume: a registered runner continues from the last committed unit; config changes are named."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from agent import pipelines
from agent.store import RunStore

OPTIONS = pipelines.LLMOptions(backend="scripted", model="fake-model")


def _texts(store):
    return [(c.index, c.text) for c in store.chapters()]


def test_start_then_resume_continues_from_the_last_unit(tmp_path, fake):
    store = pipelines.start(tmp_path / "r", "fake", {"chapters": 5, "stop_after": 2}, OPTIONS)
    assert store.info().status == "stopped" and store.next_unit() == 3
    store.close()
    with RunStore.open(tmp_path / "r") as store:
        plan = pipelines.resume(store, overrides={"stop_after": None}, force=True)
        assert [c.key for c in plan.changes] == ["stop_after"]
        assert store.info().status == "completed"
        assert _texts(store) == [(i, fake.chapter_text(i)) for i in range(1, 6)]
        assert len(store.ledger.llm_calls()) == 5
        assert [r[0] for r in store.query("SELECT kind FROM sessions ORDER BY id")] == ["start", "resume"]


def test_changed_configuration_is_refused_naming_the_keys(tmp_path, fake):
    pipelines.start(tmp_path / "r", "fake", {"chapters": 3, "stop_after": 1}, OPTIONS).close()
    with RunStore.open(tmp_path / "r") as store:
        with pytest.raises(pipelines.ConfigChangedError) as info:
            pipelines.resume(store, overrides={"chapters": 4}, llm=pipelines.LLMOptions(model="other"))
        message = str(info.value)
        assert "chapters: 3 -> 4" in message and 'llm.model: "fake-model" -> "other"' in message
        assert "--force" in message
        assert store.next_unit() == 2 and store.info().status == "stopped"  # nothing ran
        # a moved server is not a configuration change
        plan = pipelines.plan_resume(store, llm=pipelines.LLMOptions(endpoint="http://elsewhere:9000"))
        assert [c.key for c in plan.changes] == []


def test_a_new_pipeline_version_is_a_change(tmp_path, fake, monkeypatch):
    pipelines.start(tmp_path / "r", "fake", {"chapters": 2, "stop_after": 1}, OPTIONS).close()
    upgraded = pipelines.Pipeline("fake", "chapter", fake.run, version="2", defaults={"delay": 0.5, "knob": 5})
    monkeypatch.setitem(pipelines._REGISTRY, "fake", upgraded)
    with RunStore.open(tmp_path / "r") as store:
        # stored values win over new defaults; a default the run never had is a change
        assert [c.describe() for c in pipelines.plan_resume(store).changes] == [
            "knob: unset -> 5",
            'pipeline_version: "1" -> "2"',
        ]


def test_no_runner_registered(tmp_path):
    RunStore.create(tmp_path / "r", pipeline="retired-pipeline", config={}).close()
    with (
        RunStore.open(tmp_path / "r") as store,
        pytest.raises(pipelines.NoRunnerError, match="retired-pipeline pipeline"),
    ):
        pipelines.resume(store)


def _committed(run_dir) -> int:
    if not (run_dir / "run.db").exists():
        return 0
    try:
        with RunStore.open(run_dir, readonly=True) as store:
            return store.info().last_unit
    except Exception:
        return 0


def test_sigkill_mid_run_then_resume_loses_and_duplicates_nothing(tmp_path, fake):
    """Kill the writer with SIGKILL at unpredictable moments; resume through the CLI each time."""
    run_dir = tmp_path / "killed"
    script = [sys.executable, str(fake.__file__)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    total = 12
    proc = subprocess.Popen([*script, "start", str(run_dir), str(total), "0.02"], env=env)
    kills = 0
    for target in (2, 5, 8):
        deadline = time.time() + 20
        while _committed(run_dir) < target and time.time() < deadline and proc.poll() is None:
            time.sleep(0.005)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        with RunStore.open(run_dir, readonly=True) as store:
            assert store.live_status() in ("interrupted", "completed")
            done = store.info().last_unit
            assert _texts(store) == [(i, fake.chapter_text(i)) for i in range(1, done + 1)]
        proc = subprocess.Popen([*script, "resume", str(run_dir)], env=env)
    assert proc.wait(timeout=60) == 0
    assert kills >= 2
    with RunStore.open(run_dir, readonly=True) as store:
        assert store.info().status == "completed"
        assert _texts(store) == [(i, fake.chapter_text(i)) for i in range(1, total + 1)]
        assert store.query("SELECT count(*) FROM chapter_windows")[0][0] == 4 * total
        assert store.query("SELECT count(*) FROM states WHERE unit > 0")[0][0] == total
        # every commit's state matches its chapter; a killed unit left nothing behind
        assert store.state(total) == {"written": list(range(1, total + 1))}
        # the ledger kept calls of lost units too: at least one call per chapter
        assert len(store.ledger.llm_calls()) >= total
        assert store.query("SELECT count(*) FROM sessions")[0][0] == 4
