"""Options shared by every command that talks to a model."""

from __future__ import annotations

import argparse

from agent.cli.errors import CLIError


def add_model_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("model")
    group.add_argument("--backend", choices=["embedded", "endpoint"],
                       help="embedded (in-process tiny model) or endpoint (an OpenAI-compatible server); "
                       "default: endpoint if --endpoint/FABULA_ENDPOINT is set, else embedded")
    group.add_argument("--endpoint", metavar="URL", help="server base URL (env FABULA_ENDPOINT)")
    group.add_argument("--model", metavar="NAME", help="model name on the server (env FABULA_MODEL)")
    group.add_argument("--api-key", metavar="KEY", help="bearer token for the server (env FABULA_API_KEY)")
    group.add_argument("--thinking", choices=["off", "on", "auto"], default="off",
                       help="thinking mode of Qwen3-class models (default: off)")


def open_model(args: argparse.Namespace):
    from agent.llm import open_llm

    try:
        return open_llm(args.backend, model=args.model, endpoint=args.endpoint, api_key=args.api_key,
                        thinking=args.thinking)
    except ValueError as exc:
        raise CLIError(str(exc)) from exc
