"""What ``fabula serve`` checks before it launches a server (one replica or a fleet)."""

from __future__ import annotations

import os
from pathlib import Path

from agent.cli.errors import CLIError


def check_model_present(config) -> None:
    """A Hugging Face id must already be in the HF cache: say how to fetch it, do not let vLLM fail."""
    from serve.launcher import fetch_command, hf_cache_dir, in_hf_cache

    model = config.model_path
    if Path(model).expanduser().exists() or os.environ.get("HF_HUB_OFFLINE") == "0":
        return
    if model.startswith(("/", ".", "~")) or model.count("/") != 1:
        raise CLIError(f"model folder {model} does not exist")
    if not in_hf_cache(model):
        raise CLIError(f"{model} is not in the Hugging Face cache ({hf_cache_dir()}); fabula never downloads "
                       f"weights. Fetch it with:  {fetch_command(model)}   (or pass --model /path/to/folder)")


def check_driver() -> None:
    """A GPU server needs the NVIDIA driver vLLM's CUDA build runs on: refuse in one line before
    anything starts, naming the driver found and the one needed (:mod:`serve.nvidia`)."""
    from serve.nvidia import NvidiaSmiError, query

    try:
        report = query()
    except NvidiaSmiError as exc:
        raise CLIError(f"cannot read the NVIDIA driver: {exc}") from None
    problem = report.driver_problem()
    if problem:
        raise CLIError(problem)
