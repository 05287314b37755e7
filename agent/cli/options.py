"""The one model option group every model command takes, and the one way it is resolved.

``add_model_options`` gives each command the same flags; :func:`choose_model` merges them with
the environment, the config file and (for a stored run) the run's record through
:func:`agent.llm.options.resolve`; :func:`open_client` opens the one client a command uses,
before anything is created or any run's status is touched, within the call timeout.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from agent.cli import config_file
from agent.cli.checks import server_url
from agent.cli.errors import CLIError
from agent.llm import option_table
from agent.llm.option_table import RECORDED, ModelOption
from agent.llm.option_values import BadValue, Switch, Text, ValueRule, role_pairs
from agent.llm.options import LLMOptions, ModelChoiceError, ModelFlags, StoredModel, resolve

if TYPE_CHECKING:
    from agent.llm import LLM


def add_model_options(parser: argparse.ArgumentParser, *, stored: str | None = None) -> None:
    """The model flags (``agent.llm.option_table``). ``stored``: the command continues a stored run
    (or batch) of that name, whose model and server are the defaults."""
    group = parser.add_argument_group("model" + (f" (default: {RECORDED.format(run=stored)})" if stored else ""))
    for row in option_table.flags():
        assert row.flag is not None
        group.add_argument(row.flag, help=row.flag_help(stored), **_argument(row))


def add_role_options(parser: argparse.ArgumentParser, roles: Collection[str]) -> None:
    """The per-role model flags (``--role-model ROLE=MODEL``, repeatable) of a pipeline whose ``roles``
    may each have a model of their own, in the model group :func:`add_model_options` made."""
    group = next((g for g in parser._action_groups if g.title == "model"), parser)
    for row in option_table.role_flags():
        assert row.flag is not None
        group.add_argument(
            row.flag,
            action="append",
            help=row.flag_help(None, ", ".join(roles)),
            metavar=row.metavar,
        )


def _argument(row: ModelOption) -> dict[str, Any]:
    """How argparse takes ``row``'s flag: a switch, a choice, or a value its rule checks."""
    if isinstance(row.rule, Switch):
        return {"action": "store_const", "const": True, "default": None}
    shape: dict[str, Any] = {"metavar": row.metavar}
    if row.choices is not None:
        shape["choices"] = row.choices
    if row.url:
        shape["type"] = server_url
    elif not isinstance(row.rule, Text):
        shape["type"] = _checked(row.rule)
    return shape


def _checked(rule: ValueRule) -> Callable[[str], Any]:
    """An argparse ``type`` that reads a flag's value by the option's own rule."""

    def read(text: str) -> Any:
        try:
            return rule.read(text)
        except BadValue as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return read


def model_flags(args: argparse.Namespace) -> ModelFlags:
    given: dict[str, Any] = {row.field: getattr(args, row.dest, None) for row in option_table.flags()}
    for row in option_table.role_flags():  # each given once or more: one dict, the last of a role winning
        pairs: dict[str, str] = {}
        for text in getattr(args, row.dest, None) or ():
            try:
                pairs.update(role_pairs(str(row.rule.read(text))))
            except BadValue as exc:  # one line, as every refused model choice (not argparse's usage)
                raise CLIError(f"{row.flag} {exc}") from None
        given[row.field] = pairs or None
    return ModelFlags(**given)


def choose_model(
    args: argparse.Namespace,
    *,
    stored: StoredModel | None = None,
    flags: ModelFlags | None = None,
    profile: str | None = None,
    roles: Mapping[str, tuple[str, ...]] | None = None,
) -> LLMOptions:
    """The model a command uses: flags, environment, config file, the run's record, the default
    (``profile``: the one a new run asked for, which may choose the thinking mode; ``roles``: the
    roles of a new run's pipeline that may each have a model of their own)."""
    try:
        config = config_file.load().values
        return resolve(
            flags or model_flags(args), environ=os.environ, config=config, stored=stored, profile=profile, roles=roles
        )
    except ModelChoiceError as exc:
        raise CLIError(str(exc)) from None


def choose_judge(
    endpoint: str | None, model: str | None, api_key: str | None, *, endpoint_source: str = "flag"
) -> LLMOptions:
    """A judge's model: its own flags, then ``FABULA_JUDGE_*``, then the config file's ``judge_*``
    (``endpoint_source``: who named ``endpoint``, e.g. ``the grid file``)."""
    try:
        return resolve(
            ModelFlags(
                endpoint=endpoint, model=model, api_key=api_key, thinking="off", endpoint_source=endpoint_source
            ),
            purpose="judge",
            environ=os.environ,
            config=config_file.load().values,
        )
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
    return options.served(llm), llm


def open_model(args: argparse.Namespace, *, constrained: bool = True) -> LLM:
    """``fabula prompt``'s model: resolved and opened as every command's; a server is probed fully
    only when constrained replies will be asked."""
    return open_client(choose_model(args), probe="full" if constrained else "light")[1]


def _first(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
