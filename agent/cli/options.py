"""Options shared by every command that talks to a model, resolved in one place.

Flags, then environment (``FABULA_ENDPOINT``/``FABULA_MODEL``/``FABULA_API_KEY``; judges read
``FABULA_JUDGE_*``), then the embedded default: :func:`agent.llm.options.resolve`.
"""

from __future__ import annotations

import argparse
import math
import os

from agent.cli.errors import CLIError
from agent.llm.options import LLMOptions, resolve


class _ToEnvironment(argparse.Action):
    """Store the value and export it as an environment setting, so that every way a command
    opens its model (``prompt``, ``write``, ``resume``, judges) sees the same transport limits.
    Like ``--endpoint``, these are transport settings: never part of a run's configuration."""

    def __init__(self, *args, env: str, **kwargs) -> None:
        self.env = env
        super().__init__(*args, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if self.nargs == 0:
            values = True
        setattr(namespace, self.dest, values)
        os.environ[self.env] = "1" if values is True else str(values)


def call_timeout(text: str) -> float:
    """``--call-timeout``: seconds, > 0 and at most a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"must be between 0 and 86400 seconds, got {text}")
    return value


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
    group.add_argument("--call-timeout", metavar="S", type=call_timeout, action=_ToEnvironment,
                       env="FABULA_CALL_TIMEOUT",
                       help="total seconds one model call may take on a server, retries included "
                       "(env FABULA_CALL_TIMEOUT; default 600)")
    group.add_argument("--allow-unconstrained", nargs=0, default=False, action=_ToEnvironment,
                       env="FABULA_ALLOW_UNCONSTRAINED",
                       help="use a server that does not enforce JSON-schema constraints: parse, validate "
                       "and re-ask instead of stopping")


def model_options(args: argparse.Namespace) -> LLMOptions:
    """The model a command will use: flags, then environment, then the embedded default."""
    return resolve(backend=args.backend, endpoint=args.endpoint, model=args.model, api_key=args.api_key,
                   thinking=getattr(args, "thinking", None))


def open_model(args: argparse.Namespace, *, constrained: bool = True):
    """Open the model; a server is probed fully only when constrained replies will be asked."""
    from agent.llm import open_llm

    options = model_options(args)
    try:
        return open_llm(options.backend, model=options.model, endpoint=options.endpoint, api_key=options.api_key,
                        thinking=args.thinking, probe="full" if constrained else "light")
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
        llm = EndpointLLM(options.endpoint, options.model, api_key=options.api_key, probe="light")
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
