"""What ``nvidia-smi`` says about this machine's GPUs and driver, and the driver vLLM needs.

Why: vLLM 0.32 pins torch 2.13, whose PyPI build is CUDA 13.0, and CUDA 13.0 runs only on an
NVIDIA driver of the 580 series or newer; an older driver installs cleanly and fails only
when the server starts. ``nvidia-smi`` is the one tool every driver ships, so it is the
source (no torch import, no CUDA call).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass

MIN_DRIVER = 580
"""The NVIDIA driver series CUDA 13.0 (vLLM 0.32's torch 2.13 wheels) needs."""
CUDA_NEEDED = "13.0"
GIB = 2**30


@dataclass(frozen=True)
class Gpu:
    """One GPU as ``nvidia-smi`` reports it (memory in bytes)."""

    index: int
    name: str
    total_bytes: int
    free_bytes: int


@dataclass(frozen=True)
class GpuReport:
    """The machine's driver, the CUDA version it supports, and its GPUs."""

    driver: str
    cuda: str | None
    gpus: tuple[Gpu, ...]

    @property
    def driver_major(self) -> int:
        match = re.match(r"(\d+)", self.driver)
        return int(match.group(1)) if match else 0

    def driver_problem(self) -> str | None:
        """One line when the driver is too old for vLLM's CUDA build (``None``: it is new enough)."""
        if self.driver_major >= MIN_DRIVER:
            return None
        return (
            f"NVIDIA driver {self.driver} found; vLLM 0.32 (torch 2.13, CUDA {CUDA_NEEDED}) needs driver "
            f"{MIN_DRIVER} or newer: update the driver (e.g. the distribution's nvidia-driver-{MIN_DRIVER} "
            "package) and reboot"
        )


class NvidiaSmiError(RuntimeError):
    """``nvidia-smi`` is missing, failed, or printed something that could not be read."""


def query(timeout_s: float = 15.0) -> GpuReport:
    """Ask ``nvidia-smi`` (found on PATH) for the driver, the CUDA version and every GPU's memory."""
    tool = shutil.which("nvidia-smi")
    if tool is None:
        raise NvidiaSmiError("nvidia-smi not found (no NVIDIA driver installed)")
    fields = "index,name,driver_version,memory.total,memory.free"
    try:
        listing = subprocess.run(
            [tool, f"--query-gpu={fields}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
        header = subprocess.run([tool], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NvidiaSmiError(f"nvidia-smi failed: {exc}") from None
    if listing.returncode != 0:
        why = (listing.stderr or listing.stdout).strip().splitlines()
        raise NvidiaSmiError(f"nvidia-smi failed: {why[0] if why else f'exit code {listing.returncode}'}")
    return parse(listing.stdout, header.stdout if header.returncode == 0 else "")


def parse(listing: str, header: str = "") -> GpuReport:
    """``--query-gpu`` CSV lines (memory in MiB) and the plain ``nvidia-smi`` banner (for the CUDA version)."""
    gpus, driver = [], ""
    for line in listing.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5:
            raise NvidiaSmiError(f"nvidia-smi printed an unexpected line: {line!r}")
        index, name, driver, total, free = parts
        try:
            gpus.append(Gpu(int(index), name, int(float(total)) * 2**20, int(float(free)) * 2**20))
        except ValueError:
            raise NvidiaSmiError(f"nvidia-smi printed an unexpected line: {line!r}") from None
    if not gpus:
        raise NvidiaSmiError("nvidia-smi lists no GPU")
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", header)
    return GpuReport(driver=driver, cuda=cuda.group(1) if cuda else None, gpus=tuple(gpus))
