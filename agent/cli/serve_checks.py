"""What ``fabula serve`` checks before it launches a server (one replica or a fleet)."""

from __future__ import annotations

import os
from dataclasses import replace
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
        from serve.presets import PRESETS

        gated = any(p.gated for p in PRESETS.values() if p.model == model)
        login = (
            f"hf auth login, accept the licence at https://huggingface.co/{model} (a gated model), then  "
            if gated
            else ""
        )
        raise CLIError(
            f"{model} is not in the Hugging Face cache ({hf_cache_dir()}); fabula never downloads "
            f"weights. Fetch it with:  {login}{fetch_command(model)}   (or pass --model /path/to/folder)"
        )


def check_fits(preset, config, card_gib: float | None) -> None:
    """A GPU preset must hold one sequence of its context on this card (``--gpu-memory`` GiB, else the
    smallest GPU ``nvidia-smi`` lists): refuse with the arithmetic, as vLLM would only after loading."""
    from serve.nvidia import NvidiaSmiError, query
    from serve.presets import preset_fit
    from serve.sizing import ModelConfigMissing, card_of_memory

    if preset.device != "gpu" or not preset.sized_for:
        return
    if card_gib is None:
        try:
            card_gib = min(g.total_bytes for g in query().gpus) / 2**30
        except NvidiaSmiError:
            return  # check_driver said it already; a dry run sizes only with --gpu-memory
    try:
        fit = preset_fit(
            replace(preset, parallel=config.parallel, kv_cache_dtype=config.kv_cache_dtype),
            card_of_memory(card_gib),
            context=config.max_model_len,
            utilization=config.gpu_memory_utilization,
        )
    except ModelConfigMissing:
        return
    if fit is not None and not fit.starts:
        raise CLIError(
            f"preset {preset.name} cannot start on a {card_gib:.1f} GiB GPU: {fit.arithmetic()} "
            f"(fabula models --gpu-memory {card_gib:.0f} lists the presets that fit)"
        )


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
