"""``fabula serve``: run vLLM's OpenAI-compatible server for a preset or a model folder."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from agent.cli.errors import CLIError


def add_parser(sub) -> None:
    from serve.launcher import STRUCTURED_BACKENDS

    parser = sub.add_parser(
        "serve", help="start a vLLM server (OpenAI API) for a preset or a model folder",
        description="Start vLLM's OpenAI-compatible server with prefix caching and structured outputs. "
        "Without --preset or --model the tiny-cpu preset is used. Extra vLLM flags go after '--'.")
    parser.add_argument("--preset", help="a preset from 'fabula models' (default: tiny-cpu)")
    parser.add_argument("--model", metavar="PATH_OR_ID",
                        help="serve this folder or HF id (with --preset: replaces the preset's model)")
    parser.add_argument("--served-name", help="the model name clients use (default: from preset/folder)")
    parser.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--api-key", help="require this bearer token")
    parser.add_argument("--max-model-len", type=int)
    parser.add_argument("--gpu-memory-utilization", type=float)
    parser.add_argument("--dtype")
    parser.add_argument("--structured-backend", choices=STRUCTURED_BACKENDS, default="outlines")
    parser.add_argument("--cpu-kv-cache-gib", type=int, default=2, help="KV cache size on CPU (GiB)")
    parser.add_argument("--ready-timeout", type=float, default=900, help="seconds to wait for the server")
    parser.add_argument("--log-file", type=Path, help="server log (default: $FABULA_HOME/logs/serve-PORT.log)")
    parser.add_argument("--dry-run", action="store_true", help="print the vLLM command and exit")
    parser.add_argument("vllm_args", nargs=argparse.REMAINDER, help="extra vLLM arguments after '--'")
    parser.set_defaults(handler=run)


def resolve_config(args: argparse.Namespace):
    """Preset + overrides → a ServeConfig; converts the embedded model when needed."""
    from serve.launcher import ServeConfig, gpu_present
    from serve.models import ensure_embedded_model
    from serve.presets import Preset, get_preset

    if not 1 <= args.port <= 65535:
        raise CLIError(f"--port must be between 1 and 65535, got {args.port}")
    if args.gpu_memory_utilization is not None and not 0 < args.gpu_memory_utilization <= 1:
        raise CLIError("--gpu-memory-utilization must be in (0, 1]")
    if args.preset or not args.model:
        try:
            preset = get_preset(args.preset or "tiny-cpu")
        except KeyError as exc:
            raise CLIError(str(exc.args[0])) from None
    else:
        on_gpu = args.device == "gpu" or (args.device == "auto" and gpu_present())
        preset = Preset(name="custom", model=args.model, device="gpu" if on_gpu else "cpu",
                        card="-", max_model_len=args.max_model_len or 8192,
                        dtype="auto" if on_gpu else "float32",
                        gpu_memory_utilization=0.90 if on_gpu else None)
    device = preset.device if args.device == "auto" else args.device
    if device == "gpu" and not gpu_present():
        raise CLIError(f"preset {preset.name} needs an NVIDIA GPU and none was found "
                       "(use --preset tiny-cpu, or --device cpu to try anyway)")
    if args.model:
        model_path = args.model
        if Path(model_path).expanduser().exists():
            model_path = str(Path(model_path).expanduser().resolve())
    elif preset.embedded:
        model_path = str(ensure_embedded_model(log=lambda m: print(m, flush=True)).path)
    else:
        model_path = preset.model
    extra = [a for a in args.vllm_args if a != "--"]
    config = ServeConfig.from_preset(
        preset, model_path, device=device, host=args.host, port=args.port, api_key=args.api_key,
        max_model_len=args.max_model_len, gpu_memory_utilization=args.gpu_memory_utilization,
        dtype=args.dtype, structured_backend=args.structured_backend,
        cpu_kv_cache_gib=args.cpu_kv_cache_gib, served_name=args.served_name,
    )
    config.extra_args += extra
    if args.model and not args.served_name and preset.name == "custom":
        config.served_name = Path(model_path).name or model_path
    return config


def run(args: argparse.Namespace) -> int:
    from serve.launcher import ServeError, Server, server_command, vllm_importable
    from serve.models import fabula_home

    config = resolve_config(args)
    if args.dry_run:
        argv, env = server_command(config)
        shown = {k: env[k] for k in sorted(env) if k.startswith(("VLLM_", "HF_HUB"))}
        print(" ".join(f"{k}={v}" for k, v in shown.items()), " ".join(argv))
        return 0
    if not vllm_importable():
        raise CLIError("vLLM is not installed: pip install 'fabula[cpu]' (CPU) or 'fabula[gpu]' (CUDA)")
    log_path = args.log_file or fabula_home() / "logs" / f"serve-{config.port}.log"
    server = Server(config, log_path)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    print(f"fabula: starting vLLM ({config.device}) for {config.served_name}; log: {log_path}", flush=True)
    started = time.monotonic()
    server.start()
    try:
        server.wait_ready(args.ready_timeout, progress=lambda m: print(f"fabula: {m}", flush=True))
        print(f"fabula: ready in {time.monotonic() - started:.0f} s: endpoint={config.endpoint} "
              f"model={config.served_name}", flush=True)
        print(f"fabula: use it with  export FABULA_ENDPOINT={config.endpoint}   (Ctrl-C stops the server)",
              flush=True)
        code = server.process.wait()
        raise ServeError(f"vLLM exited with code {code}:\n{server.log_tail()}")
    except KeyboardInterrupt:
        print("fabula: stopping the server", file=sys.stderr, flush=True)
        server.stop()
        return 0
    finally:
        server.stop()
