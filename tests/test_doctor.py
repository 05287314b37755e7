"""``fabula doctor`` says in plain lines what will and will not work, and exits 0 when the configured
road works: on this CPU machine without a traceback, with a fake ``nvidia-smi`` reporting a 550
driver, and against a configured endpoint that answers (or does not)."""

from __future__ import annotations

import pytest

from agent.cli import main
from agent.testing.kinds import KindServer
from agent.testing.ports import free_port
from tests.fake_nvidia import install_fake_nvidia_smi


@pytest.fixture
def no_endpoint(monkeypatch, tmp_path):
    for name in ("FABULA_ENDPOINT", "FABULA_MODEL", "FABULA_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))


def test_on_a_machine_without_a_gpu_doctor_says_so_and_the_embedded_road_works(
    no_endpoint, monkeypatch, capsys, tmp_path
):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no nvidia-smi anywhere
    assert main(["doctor"]) == 0
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    assert "--  no NVIDIA GPU: nvidia-smi not found" in out.out
    assert "The configured road: the embedded model" in out.out
    assert out.out.rstrip().endswith("the configured road (the embedded model) works")


def test_a_550_driver_is_named_with_the_one_needed_and_the_presets_wait_for_it(
    no_endpoint, monkeypatch, capsys, tmp_path
):
    install_fake_nvidia_smi(
        tmp_path, monkeypatch, driver="550.54.15", cuda="12.4", gpus=(("NVIDIA GeForce RTX 4090", 24564, 23800),)
    )
    assert main(["doctor"]) == 0  # the configured road is the embedded model: it works
    out = capsys.readouterr().out
    assert "  no  NVIDIA driver 550.54.15 found; vLLM 0.32 (torch 2.13, CUDA 13.0) needs driver 580 or newer" in out
    assert "GPU 0: NVIDIA GeForce RTX 4090, 24.0 GiB, 23.2 GiB free" in out
    fits = next(line for line in out.splitlines() if "presets that fit this GPU now" in line)
    assert fits.startswith("  no ") and "qwen3-14b-awq" in fits and "(once the driver is updated)" in fits
    assert "qwen3-32b" not in fits and "gemma3-27b" not in fits


def test_a_580_driver_with_a_busy_desktop_lists_only_what_fits_in_free_memory(
    no_endpoint, monkeypatch, capsys, tmp_path
):
    install_fake_nvidia_smi(
        tmp_path, monkeypatch, driver="580.95.05", gpus=(("NVIDIA GeForce RTX 4090", 24564, 20000),)
    )  # 4 GiB held by the desktop
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "  ok  NVIDIA driver 580.95.05" in out
    fits = next(line for line in out.splitlines() if "presets that fit this GPU now" in line)
    # 0.90 x 24 GiB is more than the 19.5 GiB free: sized at what is free, the 14B no longer holds two 32K sequences
    assert "at --gpu-memory-utilization 0.81 (what is free now)" in fits
    assert "qwen3-4b-awq" in fits and "qwen3-14b-awq (1." in fits


def test_a_configured_endpoint_that_answers_is_probed(no_endpoint, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    server = KindServer("vllm")
    try:
        monkeypatch.setenv("FABULA_ENDPOINT", server.url)
        assert main(["doctor"]) == 0
    finally:
        server.close()
    out = capsys.readouterr().out
    assert f"ok  {server.url} answers: vllm 0.32.0, model tiny, context 4096 tokens" in out
    assert "ok  constrained decoding (JSON schema) enforced: yes" in out
    assert "native tool calls (--profile paper): yes" in out


def test_a_configured_endpoint_that_does_not_answer_fails_the_road(no_endpoint, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("FABULA_ENDPOINT", f"http://127.0.0.1:{free_port()}/v1")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "does not answer as fabula needs" in out and "does NOT work" in out
