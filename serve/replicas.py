"""N vLLM replicas behind one endpoint: sglang-router in front, each story kept on one replica.

Why a router and not vLLM's own ``--data-parallel-size``: vLLM's internal balancer looks at
queue lengths only, while NstAgent's linear cost needs every request of a story to land on
the replica that holds its prefix in cache. sglang-router (PyPI ``sglang-router``, Rust)
fronts any OpenAI-compatible server, vLLM included, and offers two ways to keep a story on
one replica: ``cache_aware`` (an approximate radix tree of the prompts each replica has
seen; a prompt that shares enough of its prefix goes where that prefix went) and ``manual``
(a sticky map from the ``X-SMG-Routing-Key`` header, which fabula's endpoint client sends
with the run's key on every request; new keys go to the replica with the fewest).

The replicas are plain ``fabula serve`` servers (:mod:`serve.launcher`) on loopback ports
after the router's; on CPU each gets its own cores (``taskset`` and vLLM's OpenMP binding),
on GPU its own ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from serve.launcher import ServeConfig, ServeError, Server, is_loopback

POLICIES = ("cache_aware", "manual")


@dataclass(frozen=True)
class RouterConfig:
    """sglang-router's settings, each one chosen for vLLM workers started by fabula."""

    worker_urls: tuple[str, ...]
    host: str = "127.0.0.1"
    port: int = 8000
    policy: str = "cache_aware"
    metrics_port: int = 29000
    """The router always opens a Prometheus port; fabula gives it a free one on loopback so two
    routers (or CI next to a developer) never collide on the default 29000."""
    request_timeout_s: int = 1800
    log_level: str = "warn"

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ValueError(f"router policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if not self.worker_urls:
            raise ValueError("the router needs at least one worker URL")

    @property
    def endpoint(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/v1"


def router_command(config: RouterConfig) -> list[str]:
    """The exact argv for sglang-router in front of vLLM replicas."""
    argv = [
        sys.executable, "-m", "sglang_router.launch_router",
        "--worker-urls", *config.worker_urls,
        "--policy", config.policy,
        "--host", config.host,
        "--port", str(config.port),
        "--prometheus-host", "127.0.0.1",
        "--prometheus-port", str(config.metrics_port),
        "--log-level", config.log_level,
        "--request-timeout-secs", str(config.request_timeout_s),
        # The replicas are ready before the router starts; the default 30 s between checks
        # would only delay the router's start.
        "--worker-startup-check-interval", "1",
        # fabula's client already retries what is safe to retry (agent/llm/http.py); a second
        # layer of retries would resend a long generation up to 5 times.
        "--disable-retries",
    ]
    if config.policy == "manual":
        argv += ["--assignment-mode", "min_group"]  # a new story goes to the replica with the fewest
    return argv


def router_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("sglang_router") is not None


def cpu_groups(cpus: list[int], n: int) -> list[list[int]]:
    """``cpus`` split into ``n`` contiguous groups as even as can be (one replica each)."""
    if n > len(cpus):
        raise ServeError(f"{n} CPU replicas need at least {n} CPU cores; this process may use {len(cpus)} "
                         f"({','.join(map(str, cpus))})")
    size, extra = divmod(len(cpus), n)
    groups, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        groups.append(cpus[start:end])
        start = end
    return groups


def gpu_count() -> int:
    """GPUs on this node (``nvidia-smi -L``), 0 when none can be seen."""
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def replica_configs(base: ServeConfig, n: int, *, cpus: list[int] | None = None,
                    gpus: int | None = None) -> list[ServeConfig]:
    """``n`` copies of ``base`` on loopback ports after ``base.port``, each with its own cores or GPUs.

    Each replica is one copy of the model: the preset's tensor/pipeline split is kept, its
    data-parallel size is not (the router is the data parallelism here)."""
    if not 2 <= n <= 64:
        raise ServeError(f"--replicas must be between 2 and 64, got {n}")
    parallel = replace(base.parallel, data=1)
    configs = []
    if base.device == "cpu":
        allowed = cpus if cpus is not None else sorted(os.sched_getaffinity(0))
        for i, group in enumerate(cpu_groups(allowed, n)):
            configs.append(replace(base, host="127.0.0.1", port=base.port + 1 + i, api_key=None,
                                   parallel=parallel, cpu_threads=_ranges(group), extra_args=list(base.extra_args)))
        return configs
    per = parallel.gpus_per_replica
    have = gpu_count() if gpus is None else gpus
    if n * per > have:
        raise ServeError(f"{n} replicas of {per} GPU(s) each need {n * per} GPUs; {have} found on this node")
    for i in range(n):
        devices = ",".join(str(d) for d in range(i * per, (i + 1) * per))
        configs.append(replace(base, host="127.0.0.1", port=base.port + 1 + i, api_key=None, parallel=parallel,
                               visible_devices=devices, extra_args=list(base.extra_args)))
    return configs


def pinning(config: ServeConfig) -> list[str]:
    """``taskset -c CPUS`` for a CPU replica, so its API server and engine stay on its own cores."""
    if config.device != "cpu" or not config.cpu_threads or shutil.which("taskset") is None:
        return []
    return ["taskset", "-c", config.cpu_threads]


def _ranges(cpus: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5`` (the form taskset and VLLM_CPU_OMP_THREADS_BIND take)."""
    out, start = [], cpus[0]
    for prev, cpu in zip(cpus, [*cpus[1:], None], strict=True):
        if cpu is not None and cpu == prev + 1:
            continue
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
        if cpu is not None:
            start = cpu
    return ",".join(out)


def check_router_host(host: str, allow_remote: bool) -> None:
    """The router is the only thing that may listen beyond loopback, and only when asked for."""
    if not is_loopback(host) and not allow_remote:
        raise ServeError(f"--host {host} would expose the router beyond this machine; pass --allow-remote too")


class Router(Server):
    """The sglang-router process: started, polled and stopped like a vLLM server."""

    ready_paths = ("/readiness", "/v1/models")  # /readiness: at least one healthy worker

    def __init__(self, config: RouterConfig, log_path: Path) -> None:
        self.router = config
        super().__init__(ServeConfig(model_path="-", served_name="-", device="cpu", host=config.host,
                                     port=config.port), log_path)
        self.name = "the router"

    def command(self) -> tuple[list[str], dict[str, str]]:
        return router_command(self.router), dict(os.environ)
