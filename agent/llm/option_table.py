"""Every model option, written once: its flag, environment variable, config-file key, value rule,
default and help.

The command line's model flags (``agent.cli.options``), the config file's keys
(``agent.cli.config_file``) and the resolution (``agent.llm.options.resolve``) are all read off
:data:`MODEL_OPTIONS`, so a name, a default or a range cannot differ between them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any, Literal, get_args

from agent.llm.backends import BackendNames
from agent.llm.option_values import TEXT, OneOf, Positive, RoleAssignments, Switch, ValueRule
from agent.llm.types import EMBEDDED_ENGINES, ThinkingMode

Purpose = Literal["writer", "judge"]
DEFAULT_CALL_TIMEOUT_S = 600.0
MAX_CALL_TIMEOUT_S = 86400.0
DEFAULT_MAX_REPLY_MIB = 32.0
RECORDED = "as recorded in {run}"
PROFILE_THINKING: dict[str, ThinkingMode] = {"paper": "auto"}
"""A new run's thinking mode when no flag gives one, by profile: the papers' runs sent no thinking switch
(the NstAgent reference's requests carry none), so under ``paper`` the model thinks as it does by default."""
"""What a flag's default is for a command that continues a stored run (``{run}``: its name)."""


@dataclass(frozen=True)
class ModelOption:
    """One model option and every place it is read from (``None``: not read from there).

    ``help`` is the flag's help, a template: ``{sources}`` (its variable and config key),
    ``{default}`` (the default as shown) and ``{recorded}`` (``recorded`` for a command that
    continues a stored run, else ``fresh``). ``about`` is what the config file says of the key."""

    name: str
    """The option's name where it was resolved from (``LLMOptions.origin``'s key)."""
    field: str
    """The attribute of ``ModelFlags`` and ``LLMOptions`` that holds it."""
    purpose: Purpose | None = None
    """Whose model it sets: the writer's, a judge's, or (``None``) both."""
    flag: str | None = None
    env: str | None = None
    config_key: str | None = None
    rule: ValueRule = TEXT
    default: Any = None
    help: str = ""
    recorded: str = ""
    fresh: str = ""
    about: str = ""
    metavar: str | None = None
    choices: Collection[str] | None = None
    noun: str | None = None
    """How a resolution error names the value after its source (``None``: the source alone)."""
    secret: bool = False
    url: bool = False
    per_role: bool = False
    """A per-role option (``ROLE=VALUE``, repeatable): offered only by a pipeline whose roles may
    each have their own model (``agent.pipelines.Pipeline.model_roles``), not by every model command."""

    @property
    def dest(self) -> str:
        """The flag's attribute on argparse's namespace."""
        return (self.flag or "").removeprefix("--").replace("-", "_")

    def flag_help(self, stored: str | None, roles: str = "") -> str:
        """The flag's help; ``stored``: the run (or batch) a command continues, whose values are the
        defaults; ``roles``: the roles a per-role option names."""
        default = f"{self.default:g}" if isinstance(self.default, float) else str(self.default)
        recorded = (self.recorded if stored else self.fresh).format(run=stored, default=default)
        example = "=1" if isinstance(self.rule, Switch) else ""
        sources = f"env {self.env}{example}, config {self.config_key}"
        return self.help.format(sources=sources, default=default, recorded=recorded, roles=roles)

    def named(self, source: str) -> str:
        """How a resolution error names this value read from ``source`` (a variable, ``flag``, ...)."""
        return f"{source}: {self.noun}" if self.noun else source


MODEL_OPTIONS: tuple[ModelOption, ...] = (
    ModelOption(
        "backend",
        "backend",
        flag="--backend",
        choices=BackendNames(),
        default="embedded",
        recorded=RECORDED,
        fresh="endpoint if an endpoint is set (flag, FABULA_ENDPOINT, config file), else embedded",
        help="embedded (in-process tiny model) or endpoint (an OpenAI-compatible server); default: {recorded}",
    ),
    ModelOption(
        "endpoint",
        "endpoint",
        "writer",
        "--endpoint",
        "FABULA_ENDPOINT",
        "endpoint",
        metavar="URL",
        url=True,
        help="server base URL ({sources}{recorded})",
        recorded=", else the server {run} was written on",
        about="the writer's server base URL",
    ),
    ModelOption(
        "model",
        "model",
        "writer",
        "--model",
        "FABULA_MODEL",
        "model",
        metavar="NAME",
        help="model name on the server ({recorded}{sources})",
        recorded=RECORDED + "; ",
        about="the model name on that server",
    ),
    ModelOption(
        "api_key",
        "api_key",
        "writer",
        "--api-key",
        "FABULA_API_KEY",
        "api_key",
        metavar="KEY",
        secret=True,
        help="bearer token for the server ({sources}; never stored in a run)",
        about="the bearer token for that server",
    ),
    ModelOption(
        "role_models",
        "role_models",
        "writer",
        "--role-model",
        config_key="role_models",
        rule=RoleAssignments("MODEL"),
        metavar="ROLE=MODEL",
        per_role=True,
        help="one role's model (repeatable; roles: {roles}); a role not named uses --model "
        '(config role_models = "ROLE=MODEL, ..."{recorded})',
        recorded="; default: as recorded in {run}",
        about="per-role models of a pipeline with roles (Magnet): ROLE=MODEL, ROLE=MODEL",
    ),
    ModelOption(
        "role_endpoints",
        "role_endpoints",
        "writer",
        "--role-endpoint",
        config_key="role_endpoints",
        rule=RoleAssignments("URL", urls=True),
        metavar="ROLE=URL",
        per_role=True,
        help="one role's server (repeatable), when it is not the run's: its calls go there "
        "(config role_endpoints{recorded})",
        recorded="; default: the server {run} used",
        about="per-role servers of a pipeline with roles (Magnet): ROLE=URL, ROLE=URL",
    ),
    ModelOption(
        "thinking",
        "thinking",
        flag="--thinking",
        choices=get_args(ThinkingMode),
        default="off",
        recorded=RECORDED,
        fresh="{default}",
        help="thinking mode of Qwen3-class models; auto: the model's own (default: {recorded}; a new "
        "--profile paper run: auto)",
    ),
    ModelOption(
        "call_timeout",
        "call_timeout_s",
        None,
        "--call-timeout",
        "FABULA_CALL_TIMEOUT",
        "call_timeout",
        Positive(MAX_CALL_TIMEOUT_S, "seconds"),
        DEFAULT_CALL_TIMEOUT_S,
        metavar="S",
        noun="the call timeout",
        help="total seconds one model call may take on a server, retries included ({sources}; default {default})",
        about="seconds one model call may take on a server, retries included",
    ),
    ModelOption(
        "allow_unconstrained",
        "allow_unconstrained",
        None,
        "--allow-unconstrained",
        "FABULA_ALLOW_UNCONSTRAINED",
        "allow_unconstrained",
        Switch(),
        False,
        help="use a server that does not enforce JSON-schema constraints: parse, validate and re-ask "
        "instead of stopping ({sources})",
        about="use a server that does not enforce JSON schemas (parse, validate, re-ask)",
    ),
    ModelOption(
        "engine",
        "engine",
        None,
        env="FABULA_EMBEDDED_ENGINE",
        config_key="embedded_engine",
        rule=OneOf(EMBEDDED_ENGINES),
        default="auto",
        noun="the embedded engine",
        about="the embedded model's engine: auto (llama.cpp where installed), llama.cpp or transformers",
    ),
    ModelOption(
        "max_reply_mib",
        "max_reply_mib",
        None,
        env="FABULA_MAX_REPLY_MIB",
        rule=Positive(),
        default=DEFAULT_MAX_REPLY_MIB,
    ),
    ModelOption(
        "endpoint",
        "endpoint",
        "judge",
        env="FABULA_JUDGE_ENDPOINT",
        config_key="judge_endpoint",
        url=True,
        about="the judges' server base URL",
    ),
    ModelOption(
        "model", "model", "judge", env="FABULA_JUDGE_MODEL", config_key="judge_model", about="the judge model's name"
    ),
    ModelOption(
        "api_key",
        "api_key",
        "judge",
        env="FABULA_JUDGE_API_KEY",
        config_key="judge_api_key",
        secret=True,
        about="the bearer token for the judges' server",
    ),
)
"""In the order the flags are listed in ``--help`` and the keys in the config file."""


def options_for(purpose: Purpose) -> dict[str, ModelOption]:
    """The options a resolution for ``purpose`` reads, by name (a judge shares the writer's transport limits)."""
    return {row.name: row for row in MODEL_OPTIONS if row.purpose in (None, purpose)}


def flags() -> Iterator[ModelOption]:
    """The options a model command takes as flags, in ``--help``'s order."""
    return (row for row in MODEL_OPTIONS if row.flag and not row.per_role)


def role_flags() -> Iterator[ModelOption]:
    """The per-role options, offered by a command that writes with a pipeline that has roles."""
    return (row for row in MODEL_OPTIONS if row.flag and row.per_role)


def option(name: str, purpose: Purpose = "writer") -> ModelOption:
    """The row of ``name`` for ``purpose``."""
    return options_for(purpose)[name]
