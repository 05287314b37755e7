"""``vllm serve``'s own parser and dispatcher, for tests that check fabula's argv against vLLM."""

from __future__ import annotations

import argparse

ENTRY_MODULES = ("vllm.entrypoints.cli.main", "serve.vllm_cli")


def parse_serve_argv(argv: list[str]) -> argparse.Namespace:
    """Parse a fabula server argv exactly as ``vllm serve`` does (vLLM's own subparser and its
    ``validate``), after checking that it starts vLLM's CLI with the ``serve`` subcommand."""
    from vllm.entrypoints.cli.serve import ServeSubcommand
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    assert argv[1] == "-m" and argv[2] in ENTRY_MODULES and argv[3] == "serve", argv[:4]
    parser = FlexibleArgumentParser()
    command = ServeSubcommand()
    command.subparser_init(parser.add_subparsers(dest="subparser"))
    args = parser.parse_args(argv[3:])
    command.validate(args)
    return args


def serve_dispatch(argv: list[str], monkeypatch) -> tuple[str, argparse.Namespace]:
    """Which way ``vllm serve`` would start this argv (``run_server``: one API process here,
    ``run_multi_api_server``: one per DP rank, ``run_headless``: engines only), by running vLLM's own
    ``ServeSubcommand.cmd`` with its three starters replaced by recorders."""
    import vllm.entrypoints.cli.serve as serve

    args = parse_serve_argv(argv)
    seen: list[str] = []
    monkeypatch.setattr(serve, "run_headless", lambda a: seen.append("run_headless"))
    monkeypatch.setattr(serve, "run_multi_api_server", lambda a: seen.append("run_multi_api_server"))
    monkeypatch.setattr(serve, "run_dp_supervisor", lambda a: seen.append("run_dp_supervisor"))
    monkeypatch.setattr(serve.uvloop, "run", lambda coro: (coro.close(), seen.append("run_server")))
    serve.ServeSubcommand.cmd(args)
    assert len(seen) == 1, seen
    return seen[0], args
