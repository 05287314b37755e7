"""N vLLM replicas behind one endpoint: sglang-router in front, each story kept on one replica.

Why a router: every request of a story must land on the replica that holds its prefix in cache.
The router keeps a story on one replica by ``cache_aware`` or ``manual`` routing (the
``X-SMG-Routing-Key`` header, which fabula's endpoint client sends with the run's key).
Design: docs/design/replicas.md.

The replicas are plain ``fabula serve`` servers (:mod:`serve.launcher`) on loopback ports
after the router's; on CPU each gets its own cores (``taskset`` and vLLM's OpenMP binding),
on GPU its own ``CUDA_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.error import URLError
from urllib.request import Request, urlopen

from serve.launcher import ServeConfig, ServeError, Server

POLICIES = ("cache_aware", "manual")


@dataclass(frozen=True)
class RouterConfig:
    """sglang-router's settings, each one chosen for vLLM workers started by fabula."""

    worker_urls: tuple[str, ...]
    model_id: str = "default"
    """The served model name; registered with each worker (the router cannot ask vLLM for it)."""
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
        sys.executable,
        "-m",
        "sglang_router.launch_router",
        "--policy",
        config.policy,
        "--host",
        config.host,
        "--port",
        str(config.port),
        "--prometheus-host",
        "127.0.0.1",
        "--prometheus-port",
        str(config.metrics_port),
        "--log-level",
        config.log_level,
        "--request-timeout-secs",
        str(config.request_timeout_s),
        # The workers are registered once the router answers (Router.wait_ready), each ready
        # already; the default 30 s between start-up checks would only delay serving.
        "--worker-startup-check-interval",
        "1",
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
        raise ServeError(
            f"{n} CPU replicas need at least {n} CPU cores; this process may use {len(cpus)} "
            f"({','.join(map(str, cpus))})"
        )
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


def replica_configs(
    base: ServeConfig, n: int, *, cpus: list[int] | None = None, gpus: int | None = None
) -> list[ServeConfig]:
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
            configs.append(
                replace(
                    base,
                    host="127.0.0.1",
                    port=base.port + 1 + i,
                    api_key=None,
                    parallel=parallel,
                    cpu_threads=_ranges(group),
                    extra_args=list(base.extra_args),
                )
            )
        return configs
    per = parallel.gpus_per_replica
    have = gpu_count() if gpus is None else gpus
    if n * per > have:
        raise ServeError(f"{n} replicas of {per} GPU(s) each need {n * per} GPUs; {have} found on this node")
    for i in range(n):
        devices = ",".join(str(d) for d in range(i * per, (i + 1) * per))
        configs.append(
            replace(
                base,
                host="127.0.0.1",
                port=base.port + 1 + i,
                api_key=None,
                parallel=parallel,
                visible_devices=devices,
                extra_args=list(base.extra_args),
            )
        )
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


class Router(Server):
    """The sglang-router process: started, given its workers, polled and stopped like a vLLM server.

    Workers are registered through the router's ``POST /workers`` with their model name rather
    than ``--worker-urls``: the router learns a worker's model from SGLang's ``/server_info`` or
    ``/model_info``, which vLLM does not have, and would list the model as ``unknown`` (a client
    that picks the served model from ``/v1/models`` then asks vLLM for ``unknown`` and gets 404).
    """

    ready_paths: tuple[str, ...] = ("/readiness", "/v1/models")  # /readiness: at least one healthy worker

    def __init__(self, config: RouterConfig, log_path: Path) -> None:
        self.router = config
        super().__init__(
            ServeConfig(model_path="-", served_name="-", device="cpu", host=config.host, port=config.port), log_path
        )
        self.name = "the router"

    def command(self) -> tuple[list[str], dict[str, str]]:
        return router_command(self.router), dict(os.environ)

    def wait_ready(self, timeout_s: float, progress: Callable[[str], None] | None = None) -> None:
        """Wait for the router's API, register every worker, then wait until the model is listed."""
        deadline = time.monotonic() + timeout_s
        saved, self.ready_paths = self.ready_paths, ("/health",)
        try:
            super().wait_ready(timeout_s, progress)
        finally:
            self.ready_paths = saved
        for url in self.router.worker_urls:
            self._post("/workers", {"url": url, "model_id": self.router.model_id})
        while time.monotonic() < deadline:
            listed = self._get("/v1/models")
            if self._get("/readiness") is not None and listed and self.router.model_id.encode() in listed:
                return
            if self.process is not None and self.process.poll() is not None:
                break
            time.sleep(0.5)
        raise ServeError(f"the router did not list {self.router.model_id} within {timeout_s:.0f} s:\n{self.log_tail()}")

    def _post(self, path: str, body: dict) -> None:
        request = Request(
            f"http://127.0.0.1:{self.router.port}{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urlopen(request, timeout=10) as response:
                response.read()
        except (URLError, OSError, ValueError) as exc:
            raise ServeError(f"the router refused worker {body.get('url')}: {exc}") from None
