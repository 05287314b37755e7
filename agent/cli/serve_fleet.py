"""``fabula serve --replicas N``: N vLLM replicas behind sglang-router, one endpoint.

The endpoint printed is the router's; point ``fabula write``/``fabula batch`` at it as at a
single server. fabula's endpoint client sends each run's routing key, so ``--router-policy
manual`` keeps a story on one replica by key, and ``cache_aware`` does so by prompt prefix.
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
import time

from agent.cli.errors import CLIError


def say(message: str) -> None:
    print(f"fabula: {message}", flush=True)


def run_fleet(args: argparse.Namespace, config) -> int:
    """Plan the replicas and the router, then run them until Ctrl-C (or print them with --dry-run)."""
    from serve.launcher import ServeError, server_command, shown_command
    from serve.replicas import RouterConfig, pinning, replica_configs, router_command

    _check_fleet(args, config)
    try:
        gpus = None  # counted on this node; a dry run plans for as many as it needs
        if args.dry_run and config.device == "gpu":
            gpus = args.replicas * config.parallel.gpus_per_replica
        replicas = replica_configs(config, args.replicas, gpus=gpus)
    except ServeError as exc:
        raise CLIError(str(exc)) from None
    router = RouterConfig(
        worker_urls=tuple(r.endpoint.removesuffix("/v1") for r in replicas),
        model_id=config.served_name,
        host=config.host,
        port=config.port,
        policy=args.router_policy,
        metrics_port=config.port + args.replicas + 1,
    )
    if args.dry_run:
        for replica in replicas:
            argv, env = server_command(replica)
            print(shown_command([*pinning(replica), *argv], env))
        print(shlex.join(router_command(router)))
        for url in router.worker_urls:  # the router learns each worker and its model by POST /workers
            body = json.dumps({"url": url, "model_id": router.model_id})
            print(
                shlex.join(
                    [
                        "curl",
                        "-X",
                        "POST",
                        f"http://127.0.0.1:{router.port}/workers",
                        "-H",
                        "Content-Type: application/json",
                        "-d",
                        body,
                    ]
                )
            )
        return 0
    return _serve(args, config, replicas, router)


def _check_fleet(args: argparse.Namespace, config) -> None:
    """Refuse what a fleet cannot do, before anything is planned."""
    if args.replicas < 2:
        raise CLIError(f"--replicas must be 2 or more (1 is a plain server), got {args.replicas}")
    if config.api_key:
        raise CLIError(
            "--api-key is not supported with --replicas yet: sglang-router would need it on its "
            "command line, visible to every user of this machine; keep the router on loopback"
        )
    if (args.data_parallel_size or 1) != 1:
        raise CLIError(
            "--replicas replaces vLLM's data parallelism (each replica is one copy of the model "
            "behind the router); drop --data-parallel-size"
        )
    if config.port + args.replicas + 1 > 65535:
        raise CLIError(f"--port {config.port} leaves no room for {args.replicas} replica ports after it")


def _serve(args: argparse.Namespace, config, replicas, router) -> int:
    """Start the replicas and the router, and watch them until Ctrl-C."""
    from agent.cli.serve_checks import check_model_present
    from agent.weights.home import fabula_home
    from serve.fleet import Fleet
    from serve.launcher import vllm_importable
    from serve.replicas import router_installed

    check_model_present(config)
    if not vllm_importable():
        raise CLIError("vLLM is not installed: run scripts/setup (CPU), or pip install -e '.[gpu]' (CUDA)")
    if not router_installed():
        raise CLIError("sglang-router is not installed: run scripts/setup, or pip install 'sglang-router==0.3.2'")
    log_dir = args.log_file.parent if args.log_file else fabula_home() / "logs"
    fleet = Fleet(replicas, router, log_dir)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    say(
        f"starting {len(replicas)} vLLM replicas ({config.device}) for {config.served_name} on ports "
        f"{replicas[0].port}-{replicas[-1].port}; logs: {log_dir}"
    )
    started = time.monotonic()
    try:
        fleet.start(args.ready_timeout, say)
        say(
            f"ready in {time.monotonic() - started:.0f} s: endpoint={router.endpoint} model={config.served_name} "
            f"replicas={len(replicas)} policy={router.policy}"
        )
        say(f"use it with  export FABULA_ENDPOINT={router.endpoint}   (Ctrl-C stops the router and every replica)")
        fleet.watch(say)
    except KeyboardInterrupt:
        print("fabula: stopping the router and the replicas", file=sys.stderr, flush=True)
        return 0
    finally:
        fleet.stop()
    return 1  # unreachable: watch() only returns by raising
