"""A fake ``nvidia-smi`` on PATH: the driver, CUDA version and GPUs a test wants the machine to have."""

from __future__ import annotations

import os
from pathlib import Path


def install_fake_nvidia_smi(
    folder: Path,
    monkeypatch,
    *,
    driver: str = "580.95.05",
    cuda: str = "13.0",
    gpus: tuple[tuple[str, int, int], ...] = (("NVIDIA GeForce RTX 4090", 24564, 23800),),
) -> Path:
    """Write ``folder/nvidia-smi`` answering ``--query-gpu`` (GPUs as name, total MiB, free MiB) and the
    plain banner, and put ``folder`` first on PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = "\n".join(f"{i}, {name}, {driver}, {total}, {free}" for i, (name, total, free) in enumerate(gpus))
    banner = f"| NVIDIA-SMI {driver}    Driver Version: {driver}    CUDA Version: {cuda}     |"
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"  --query-gpu=*) cat <<'ROWS'\n{rows}\nROWS\n;;\n"
        f"  -L) echo 'GPU 0: {gpus[0][0]}' ;;\n"
        f"  *) echo '{banner}' ;;\n"
        "esac\n"
    )
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return script
