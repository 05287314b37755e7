"""Options shared by every command that talks to a model, resolved in one place.

Flags, then environment (``FABULA_ENDPOINT``/``FABULA_MODEL``/``FABULA_API_KEY``; judges read
``FABULA_JUDGE_*``), then the embedded default: :func:`agent.llm.options.resolve`.
"""

from __future__ import annotations

import argparse

from agent.cli.errors import CLIError
from agent.llm.options import LLMOptions, resolve


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


def model_options(args: argparse.Namespace) -> LLMOptions:
    """The model a command will use: flags, then environment, then the embedded default."""
    return resolve(backend=args.backend, endpoint=args.endpoint, model=args.model, api_key=args.api_key,
                   thinking=getattr(args, "thinking", None))


def open_model(args: argparse.Namespace):
    try:
        return model_options(args).open()
    except ValueError as exc:
        raise CLIError(str(exc)) from exc


def check_server(options: LLMOptions) -> LLMOptions:
    """Before a run is created: an unreachable server is one line, and a server that serves one
    model names it (so the run records the model, not ``null``)."""
    from agent.llm import EndpointUnavailableError, LLMError
    from agent.llm.endpoint import EndpointLLM

    if options.backend != "endpoint":
        return options
    if not options.endpoint:
        raise CLIError("the endpoint backend needs --endpoint URL (or FABULA_ENDPOINT)")
    try:
        llm = EndpointLLM(options.endpoint, options.model, api_key=options.api_key)
    except EndpointUnavailableError as exc:
        raise CLIError(f"cannot reach the server: {str(exc).splitlines()[0]}", exit_code=1) from exc
    except (LLMError, ValueError) as exc:
        raise CLIError(str(exc).splitlines()[0]) from exc
    try:
        served = llm.served_models()  # type: ignore[attr-defined]
    except LLMError as exc:
        raise CLIError(f"cannot reach the server: {str(exc).splitlines()[0]}", exit_code=1) from exc
    finally:
        llm.close()
    if options.model is None and len(served) == 1:
        return LLMOptions(options.backend, served[0], options.thinking, options.endpoint, options.api_key)
    return options
