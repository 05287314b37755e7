"""The launcher's process handling, without starting vLLM (the server tests start the real one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from serve.launcher import ServeConfig, Server, cpu_thread_binding, server_command
from serve.presets import PRESETS, get_preset

ROOT = Path(__file__).resolve().parents[1]


def test_thread_binding_names_every_allowed_cpu():
    binding = cpu_thread_binding()
    cpus = set()
    for part in binding.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    assert cpus == set(os.sched_getaffinity(0))


def test_every_gpu_preset_is_fully_specified():
    for preset in PRESETS.values():
        assert preset.max_model_len > 0 and preset.dtype and preset.card
        if preset.device == "gpu":
            assert preset.gpu_memory_utilization and "/" in preset.model
            argv, _ = server_command(ServeConfig.from_preset(preset, preset.model))
            assert "--gpu-memory-utilization" in argv and "--enforce-eager" not in argv
    assert get_preset("tiny-cpu").embedded
    with pytest.raises(KeyError, match="tiny-cpu"):
        get_preset("nope")


def test_server_dies_with_an_abruptly_killed_parent(tmp_path):
    """kill -9 of `fabula serve` must not leave an orphaned server holding the port."""
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from serve.launcher import Server, ServeConfig
        import serve.launcher as launcher
        launcher.server_command = lambda config: ([sys.executable, "-c", "import time; time.sleep(120)"], {{}})
        server = Server(ServeConfig(model_path="x", served_name="x", device="cpu"), Path({str(tmp_path / "log")!r}))
        server.start()
        print(server.process.pid, flush=True)
        time.sleep(120)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child_pid = int(parent.stdout.readline())
    os.kill(child_pid, 0)  # alive
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            return
        # reap it if it became our zombie (it does not: it is reparented to init)
        time.sleep(0.2)
    pytest.fail("the server outlived its killed parent")


def test_stop_escalates_and_reports_log_tail(tmp_path, monkeypatch):
    import serve.launcher as launcher

    stubborn = (
        "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('booting', flush=True); "
        "time.sleep(120)"
    )
    monkeypatch.setattr(launcher, "server_command", lambda config: ([sys.executable, "-c", stubborn], dict(os.environ)))
    server = Server(ServeConfig(model_path="x", served_name="x", device="cpu", port=1), tmp_path / "log")
    server.start()
    time.sleep(1.0)
    started = time.monotonic()
    server.stop(grace_s=1.0)  # SIGINT ignored → SIGTERM ends it
    assert server.process.poll() is not None and time.monotonic() - started < 15
    assert "booting" in server.log_tail()


def test_wait_ready_reports_a_dying_server_with_its_log(tmp_path, monkeypatch):
    import serve.launcher as launcher

    dying = "import sys; print('ValueError: no model here', flush=True); sys.exit(3)"
    monkeypatch.setattr(launcher, "server_command", lambda config: ([sys.executable, "-c", dying], dict(os.environ)))
    server = Server(ServeConfig(model_path="x", served_name="x", device="cpu", port=1), tmp_path / "log")
    server.start()
    with pytest.raises(launcher.ServeError, match=r"(?s)exited with code 3.*no model here"):
        server.wait_ready(timeout_s=30)
