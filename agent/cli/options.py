"""The one model option group every model command takes, and the one way it is resolved.

``add_model_options`` gives each command the same flags; :func:`choose_model` merges them with
the environment, the config file and (for a stored run) the run's record through
:func:`agent.llm.options.resolve`; :func:`open_client` opens the one client a command uses,
before anything is created or any run's status is touched, within the call timeout.
"""

from __future__ import annotations

import argparse
import math
import os
from dataclasses import replace
from typing import TYPE_CHECKING

from agent.cli import config_file
from agent.cli.checks import server_url
from agent.cli.errors import CLIError
from agent.llm.options import LLMOptions, ModelChoiceError, ModelFlags, StoredModel, resolve

if TYPE_CHECKING:
    from agent.llm import LLM


def call_timeout(text: str) -> float:
    """``--call-timeout``: seconds, > 0 and at most a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"must be between 0 and 86400 seconds, got {text}")
    return value


def add_model_options(parser: argparse.ArgumentParser, *, stored: str | None = None) -> None:
    """The model flags. ``stored``: the command continues a stored run (or batch) of that name,
    whose model and server are the defaults."""
    default = f"as recorded in {stored}" if stored else None
    group = parser.add_argument_group("model" + (f" (default: {default})" if stored else ""))
    group.add_argument("--backend", choices=["embedded", "endpoint"],
                       help="embedded (in-process tiny model) or endpoint (an OpenAI-compatible server); default: "
                       + (default or "endpoint if an endpoint is set (flag, FABULA_ENDPOINT, config file), else "
                          "embedded"))
    group.add_argument("--endpoint", metavar="URL", type=server_url,
                       help="server base URL (env FABULA_ENDPOINT, config endpoint"
                       + (f", else the server {stored} was written on" if stored else "") + ")")
    group.add_argument("--model", metavar="NAME",
                       help="model name on the server (" + (default + "; " if stored else "")
                       + "env FABULA_MODEL, config model)")
    group.add_argument("--api-key", metavar="KEY",
                       help="bearer token for the server (env FABULA_API_KEY, config api_key; never stored in a run)")
    group.add_argument("--thinking", choices=["off", "on", "auto"],
                       help=f"thinking mode of Qwen3-class models (default: {default or 'off'})")
    group.add_argument("--call-timeout", metavar="S", type=call_timeout,
                       help="total seconds one model call may take on a server, retries included "
                       "(env FABULA_CALL_TIMEOUT, config call_timeout; default 600)")
    group.add_argument("--allow-unconstrained", action="store_const", const=True, default=None,
                       help="use a server that does not enforce JSON-schema constraints: parse, validate and re-ask "
                       "instead of stopping (env FABULA_ALLOW_UNCONSTRAINED=1, config allow_unconstrained)")


def model_flags(args: argparse.Namespace) -> ModelFlags:
    return ModelFlags(backend=getattr(args, "backend", None), endpoint=getattr(args, "endpoint", None),
                      model=getattr(args, "model", None), api_key=getattr(args, "api_key", None),
                      thinking=getattr(args, "thinking", None), call_timeout_s=getattr(args, "call_timeout", None),
                      allow_unconstrained=getattr(args, "allow_unconstrained", None))


def choose_model(args: argparse.Namespace, *, stored: StoredModel | None = None,
                 flags: ModelFlags | None = None) -> LLMOptions:
    """The model a command uses: flags, environment, config file, the run's record, the default."""
    try:
        return resolve(flags or model_flags(args), environ=os.environ, config=config_file.load().values,
                       stored=stored)
    except ModelChoiceError as exc:
        raise CLIError(str(exc)) from None


def choose_judge(endpoint: str | None, model: str | None, api_key: str | None, *,
                 endpoint_source: str = "flag") -> LLMOptions:
    """A judge's model: its own flags, then ``FABULA_JUDGE_*``, then the config file's ``judge_*``
    (``endpoint_source``: who named ``endpoint``, e.g. ``the grid file``)."""
    try:
        return resolve(ModelFlags(endpoint=endpoint, model=model, api_key=api_key, thinking="off",
                                  endpoint_source=endpoint_source), purpose="judge",
                       environ=os.environ, config=config_file.load().values)
    except ModelChoiceError as exc:
        raise CLIError(str(exc)) from None


def open_client(options: LLMOptions, *, probe: str = "full") -> tuple[LLMOptions, LLM]:
    """Open the one client a command uses, before anything is created: a server that cannot be
    reached (within the call timeout), refuses the key or does not serve the model is one line
    and exit 2 (nothing was started). Returns the options with the model the server serves
    filled in (so a run records the model, not ``null``) and the open model."""
    from agent.llm import EndpointUnavailableError, LLMError

    try:
        llm = options.open() if probe == "full" else options.open(probe=probe)  # type: ignore[arg-type]
    except EndpointUnavailableError as exc:
        raise CLIError(f"cannot reach the server: {_first(exc)}; nothing was started") from exc
    except (LLMError, ValueError) as exc:
        raise CLIError(f"{_first(exc)}; nothing was started") from exc
    if options.backend == "endpoint" and not options.model and llm.model:
        options = replace(options, model=llm.model)
    return options, llm


def open_model(args: argparse.Namespace, *, constrained: bool = True) -> LLM:
    """``fabula prompt``'s model: resolved and opened as every command's; a server is probed fully
    only when constrained replies will be asked."""
    return open_client(choose_model(args), probe="full" if constrained else "light")[1]


def _first(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
