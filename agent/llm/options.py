"""Which model a command uses and how it is reached, resolved in one place: :func:`resolve`.

Every command that talks to a model (``write``, ``resume``, ``fork``, ``edit``, ``batch``,
``prompt``, the ``eval`` judges) hands :func:`resolve` what its command line said
(:class:`ModelFlags`), the environment, the config file's values and, for a stored run, what
the run recorded (:class:`StoredModel`). The result is one typed :class:`LLMOptions` that is
handed down; nothing below the CLI reads the environment for it.

Precedence, field by field:

- transport (endpoint, API key, call timeout, unconstrained policy, reply cap): flag, then
  environment, then config file, then the run's record, then the default. A key is never
  stored in a run, so it comes from the first three only.
- identity (backend, model, thinking: part of a run's configuration): flag, then the run's
  record; a new run takes the environment, then the config file, then the embedded default (thinking:
  the profile's, ``option_table.PROFILE_THINKING``, then the default).

Each option's flag, variable, config key, rule and default are written once, in
:mod:`agent.llm.option_table`; the backends are opened through :mod:`agent.llm.backends`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from agent.llm.backends import ProbeDepth, backend_factory, register_backend
from agent.llm.option_table import (
    DEFAULT_CALL_TIMEOUT_S,
    DEFAULT_MAX_REPLY_MIB,
    PROFILE_THINKING,
    ModelOption,
    Purpose,
    option,
    options_for,
)
from agent.llm.option_values import BadValue, role_pairs

if TYPE_CHECKING:
    from agent.llm.base import LLM


class ModelChoiceError(ValueError):
    """A model setting that cannot be used (a bad number, an endpoint backend without a URL)."""


@dataclass(frozen=True)
class LLMOptions:
    """How to reach the model. ``backend``, ``model`` and ``thinking`` are part of the run's
    configuration; the rest is transport only (a server may move, a timeout may change)."""

    backend: str | None = None
    model: str | None = None
    thinking: str | None = None
    endpoint: str | None = field(default=None, compare=False)
    api_key: str | None = field(default=None, compare=False, repr=False)
    call_timeout_s: float = field(default=DEFAULT_CALL_TIMEOUT_S, compare=False)
    allow_unconstrained: bool = field(default=False, compare=False)
    max_reply_mib: float = field(default=DEFAULT_MAX_REPLY_MIB, compare=False)
    engine: str = field(default="auto", compare=False)
    """The embedded backend's engine (``agent.llm.embedded_engines``): how, not what, it runs."""
    roles: tuple[RoleChoice, ...] = ()
    """The roles that have a model of their own (``--role-model``, ``--role-endpoint``): part of the
    run's configuration (their models); a role not among them asks the run's model."""
    origin: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    """Where each resolved value came from (``flag``, an environment variable, ``config file``,
    ``the run's record``, ``default``): what ``describe`` and ``fabula config show`` say."""

    def fingerprinted(self) -> dict[str, Any]:
        record: dict[str, Any] = {"backend": self.backend, "model": self.model, "thinking": self.thinking or "off"}
        if self.roles:
            record["roles"] = {role.name: role.options.model for role in self.roles}
        return record

    def transport(self) -> dict[str, Any]:
        """What a session records about how it reached the model (no credentials): a later
        ``resume`` finds the same server from it."""
        record: dict[str, Any] = {"backend": self.backend, "endpoint": redact_url(self.endpoint), "model": self.model}
        if self.allow_unconstrained:
            record["allow_unconstrained"] = True
        servers = {role.name: redact_url(role.endpoint) for role in self.roles if role.endpoint}
        if servers:
            record["role_endpoints"] = servers
        return record

    def describe(self) -> str:
        """One line for the terminal: backend, endpoint (credentials removed), model, and where
        the endpoint came from when it was not given on the command line."""
        model = self.model or ("the embedded default" if self.backend == "embedded" else "the server's only model")
        where = f" at {redact_url(self.endpoint)}" if self.backend == "endpoint" and self.endpoint else ""
        source = self.origin.get("endpoint") if where else None
        roles = "; ".join(role.describe() for role in self.roles)
        return (
            f"backend {self.backend}{where}, model {model}"
            + (f" (endpoint from {source})" if source and source != "flag" else "")
            + (f"; {roles}" if roles else "")
        )

    def served(self, llm: LLM) -> LLMOptions:
        """These options with the model each open server serves filled in where none was named (so
        a run records the models, not ``null``)."""
        from agent.llm.role_router import RoleRouter

        options = self
        if self.backend == "endpoint" and not self.model and llm.model:
            options = replace(options, model=llm.model)
        if isinstance(llm, RoleRouter) and self.roles:
            roles = tuple(
                replace(role, options=replace(role.options, model=llm.by_role[role.serves[0]].model))
                if not role.options.model and role.serves and role.serves[0] in llm.by_role
                else role
                for role in self.roles
            )
            options = replace(options, roles=roles)
        return options

    def open(
        self, store: Any = None, *, probe: Literal["off", "light", "full"] = "full", routing_key: str | None = None
    ) -> LLM:
        """Open the model (one client); with ``store``, its calls are recorded in the run's ledger
        and the client is the run's (:meth:`attach_run`)."""
        if routing_key is None and store is not None and self.backend == "endpoint":
            routing_key = run_routing_key(store)
        llm = self._build(probe, routing_key)
        if self.roles:
            llm = self._routed(llm, probe, routing_key)
        if store is not None:
            llm.recorders.append(store.ledger.recorder)
            self._record_probe(llm, store)
        return llm

    def attach_run(self, llm: LLM, store: Any) -> LLM:
        """Make an open client a run's: a router's sticky key set from the run and the server's
        probe kept with the run (what it is and enforces, once per session)."""
        if self.backend == "endpoint" and hasattr(llm, "set_routing_key"):
            llm.set_routing_key(run_routing_key(store))
        self._record_probe(llm, store)
        return llm

    @staticmethod
    def _record_probe(llm: LLM, store: Any) -> None:
        probe = getattr(llm, "probe", None)
        if probe is not None:
            store.plans.record_server_probe(probe.as_dict())

    def _routed(self, llm: LLM, probe: Literal["off", "light", "full"], key: str | None) -> LLM:
        """The run's model and each role's own, as one :class:`~agent.llm.role_router.RoleRouter`
        (a role whose model cannot be opened closes what was opened and raises)."""
        from agent.llm.role_router import RoleRouter

        def same(options: LLMOptions) -> tuple[Any, ...]:
            return options.backend, options.endpoint, options.model

        opened = {same(self): llm}  # one client per model and server, however many roles share it
        by_role: dict[str, LLM] = {}
        try:
            for role in self.roles:
                served = same(role.options) if role.options.model else (role.name,)  # unnamed: its own
                if served not in opened:
                    opened[served] = role.options._build(probe, key)
                by_role.update(dict.fromkeys(role.serves, opened[served]))
        except BaseException:
            for model in opened.values():
                model.close()
            raise
        return RoleRouter(llm, by_role)

    def _build(self, probe: Literal["off", "light", "full"], key: str | None) -> LLM:
        from agent.llm.types import LLMSetupError

        factory = backend_factory(self.backend or "")
        if factory is None:
            raise LLMSetupError(f"unknown backend {self.backend!r}; use embedded or endpoint")
        return factory(self, probe, key)


@dataclass(frozen=True)
class RoleChoice:
    """One role with a model of its own: ``name`` (``critic``), the ledger roles of its calls
    (``serves``), its own server (``endpoint``; ``None``: the run's) and how it is reached."""

    name: str
    serves: tuple[str, ...]
    options: LLMOptions
    endpoint: str | None = None

    def describe(self) -> str:
        model = self.options.model or "the server's only model"
        where = f" at {redact_url(self.endpoint)}" if self.endpoint else ""
        return f"{self.name}: model {model}{where}"


def _open_embedded(options: LLMOptions, probe: ProbeDepth, key: str | None) -> LLM:
    """The built-in ``embedded`` backend: the tiny default model (or ``options.model``) in-process."""
    from agent.llm.embedded_engines import open_embedded

    return open_embedded(options.model, thinking=options.thinking or "off", engine=options.engine)  # type: ignore[arg-type]


def _open_endpoint(options: LLMOptions, probe: ProbeDepth, key: str | None) -> LLM:
    """The built-in ``endpoint`` backend: an OpenAI-compatible server, probed as it opens."""
    from agent.llm.endpoint import EndpointLLM
    from agent.llm.http import HttpLimits
    from agent.llm.types import LLMSetupError

    if not options.endpoint:
        row = option("endpoint")
        raise LLMSetupError(
            f"the endpoint backend needs {row.flag} {row.metavar} (or {row.env}, or "
            f"{row.config_key} in the config file)"
        )
    limits = HttpLimits(
        call_budget_s=options.call_timeout_s, max_response_bytes=max(int(options.max_reply_mib * 2**20), 1024)
    )
    return EndpointLLM(
        options.endpoint,
        options.model,
        api_key=options.api_key,
        thinking=options.thinking or "off",  # type: ignore[arg-type]
        limits=limits,
        probe=probe,
        allow_unconstrained=options.allow_unconstrained,
        routing_key=key,
    )


register_backend("embedded", _open_embedded)
register_backend("endpoint", _open_endpoint)


@dataclass(frozen=True)
class ModelFlags:
    """What a command line said about the model (``None``: not said)."""

    backend: str | None = None
    endpoint: str | None = None
    model: str | None = None
    api_key: str | None = field(default=None, repr=False)
    thinking: str | None = None
    call_timeout_s: float | None = None
    allow_unconstrained: bool | None = None
    endpoint_source: str = "flag"
    """Who named ``endpoint``: ``flag`` (the user, now) or a file (``the grid file``): a file's server
    gets the user's configured key only when it is the server that key was configured for."""
    role_models: Mapping[str, str] | None = None
    """``--role-model ROLE=MODEL``, by role."""
    role_endpoints: Mapping[str, str] | None = None
    """``--role-endpoint ROLE=URL``, by role."""

    @classmethod
    def of(cls, options: LLMOptions) -> ModelFlags:
        """An already chosen model, taken as if every field of it had been given (Python callers)."""
        return cls(
            options.backend,
            options.endpoint,
            options.model,
            options.api_key,
            options.thinking,
            options.call_timeout_s if options.call_timeout_s != DEFAULT_CALL_TIMEOUT_S else None,
            options.allow_unconstrained or None,
            role_models={role.name: role.options.model for role in options.roles if role.options.model} or None,
            role_endpoints={role.name: role.endpoint for role in options.roles if role.endpoint} or None,
        )


@dataclass(frozen=True)
class StoredModel:
    """What a run (or a batch) recorded about its model: its configuration's ``llm`` and the
    transport of its last session. An endpoint stored with its credentials redacted cannot be
    reused (``endpoint`` is then ``None`` and ``redacted_endpoint`` says so)."""

    backend: str | None = None
    model: str | None = None
    thinking: str | None = None
    endpoint: str | None = None
    allow_unconstrained: bool = False
    redacted_endpoint: str | None = None
    role_models: Mapping[str, str] = field(default_factory=dict)
    """The models the run's roles had of their own (its configuration's ``llm.roles``)."""
    role_endpoints: Mapping[str, str] = field(default_factory=dict)
    """The servers its roles were reached on, where not the run's (one with credentials, redacted, is
    not usable: a resume is then told to give it again)."""
    model_roles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """The run's pipeline's roles that may have a model of their own, with their ledger roles."""

    @classmethod
    def from_record(
        cls,
        llm: Mapping[str, Any] | None,
        transport: Mapping[str, Any] | None = None,
        *,
        backend: str | None = None,
        model: str | None = None,
        model_roles: Mapping[str, tuple[str, ...]] | None = None,
    ) -> StoredModel:
        llm = llm if isinstance(llm, Mapping) else {}
        transport = transport if isinstance(transport, Mapping) else {}
        endpoint = transport.get("endpoint") or llm.get("endpoint")
        endpoint = endpoint if isinstance(endpoint, str) and endpoint else None
        usable = endpoint if endpoint is None or "***" not in endpoint else None
        roles = llm.get("roles")
        roles = roles if isinstance(roles, Mapping) else {}
        servers = transport.get("role_endpoints")
        servers = servers if isinstance(servers, Mapping) else {}
        return cls(
            backend=llm.get("backend") or backend,
            model=llm.get("model") or model,
            thinking=llm.get("thinking"),
            endpoint=usable,
            allow_unconstrained=bool(transport.get("allow_unconstrained")),
            redacted_endpoint=endpoint if usable is None and endpoint else None,
            role_models={str(k): v for k, v in roles.items() if isinstance(v, str) and v},
            role_endpoints={str(k): v for k, v in servers.items() if isinstance(v, str) and v},
            model_roles=dict(model_roles or {}),
        )


def resolve(
    flags: ModelFlags | None = None,
    *,
    purpose: Purpose = "writer",
    environ: Mapping[str, str] | None = None,
    config: Mapping[str, Any] | None = None,
    stored: StoredModel | None = None,
    profile: str | None = None,
    roles: Mapping[str, tuple[str, ...]] | None = None,
) -> LLMOptions:
    """The one model resolution (see the module's docstring for the order).

    ``environ``: the environment to read (``None``: none; the CLI passes ``os.environ``);
    ``config``: the config file's values; ``stored``: the run's record, for a command that
    continues a run; ``profile``: the profile a new run asked for; ``roles``: the roles of the
    pipeline a new run writes with that may each have a model of their own, with the ledger roles
    of their calls (a stored run's come with its record)."""
    sources = _Sources(flags or ModelFlags(), options_for(purpose), environ or {}, config or {}, stored)
    backend, endpoint = _server(sources)
    model = _model(sources, backend)
    thinking = sources.pick(
        "thinking",
        sources.flag("thinking"),
        (sources.record.thinking, _FROM_RUN),
        (PROFILE_THINKING.get(profile or ""), f"--profile {profile}"),
        sources.default("thinking"),
    )
    api_key = _api_key(sources, endpoint) if backend == "endpoint" else None
    limits = {name: _limit(sources, name) for name in _LIMITS}
    engine = sources.read("engine", limits.pop("engine"))
    if backend == "endpoint" and not endpoint and sources.record.redacted_endpoint:
        raise ModelChoiceError(
            f"this run's server ({sources.record.redacted_endpoint}) was reached with credentials "
            "in its URL, which are never stored: give --endpoint URL"
        )
    read = {sources.rows[name].field: sources.read(name, value) for name, value in limits.items()}
    chosen = LLMOptions(backend, model, thinking, endpoint, api_key, engine=engine, origin=sources.origin, **read)
    known = roles if roles is not None else sources.record.model_roles
    if not known:
        for name in ("role_models", "role_endpoints"):
            if getattr(sources.flags, name, None) and name in sources.rows:
                raise ModelChoiceError(
                    f"{sources.rows[name].flag}: this pipeline has no roles with models of their own"
                )
        return chosen
    return replace(chosen, roles=_roles(sources, chosen, known))


def _roles(sources: _Sources, writer: LLMOptions, known: Mapping[str, tuple[str, ...]]) -> tuple[RoleChoice, ...]:
    """The roles with a model of their own. A role's model: the flag's, then the run's record (a new
    run: the config file's); its server: the flag's, then the config file's, then the record's (none:
    the run's). A role on the run's server gets the run's model when only its server is named there,
    and the run's key; a role on another server gets no key and, unnamed, that server's only model."""
    flags, record, fresh = sources.flags, sources.record, sources.stored is None

    def given(name: str, stored: Mapping[str, str], *, transport: bool) -> dict[str, str]:
        conf = sources.config.get(name) if fresh or transport else None
        configured = role_pairs(sources.read(name, conf)) if conf else {}
        flagged = dict(getattr(flags, name, None) or {})
        unknown = sorted(set(flagged) - set(known))
        if unknown:
            raise ModelChoiceError(f"{sources.rows[name].flag}: unknown role {unknown[0]!r}; roles: {', '.join(known)}")
        merged = {**stored, **configured, **flagged} if transport else {**configured, **stored, **flagged}
        return {role: value for role, value in merged.items() if role in known}

    models = given("role_models", record.role_models if not fresh else {}, transport=False)
    servers = given("role_endpoints", record.role_endpoints if not fresh else {}, transport=True)
    chosen = []
    for name, serves in known.items():
        if name not in models and name not in servers:
            continue
        server = servers.get(name)
        if server is not None and "***" in server and server == record.role_endpoints.get(name):
            raise ModelChoiceError(
                f"this run's server of the role {name} ({server}) was reached with credentials in its URL, which "
                "are never stored: give it as role_endpoints in the config file"
            )
        if server is not None:
            _check_url(server, f"the server of the role {name}")
        shared = server is None or (writer.backend == "endpoint" and same_origin(server, writer.endpoint))
        options = replace(
            writer,
            backend="endpoint" if server else writer.backend,
            model=models.get(name) or (writer.model if shared else None),
            endpoint=server or writer.endpoint,
            api_key=writer.api_key if shared else None,
            roles=(),
            origin={},
        )
        chosen.append(RoleChoice(name, tuple(serves), options, server))
    return tuple(chosen)


def _check_url(url: str, what: str) -> None:
    from agent.llm.http import normalize_base_url

    try:
        normalize_base_url(url)
    except ValueError as exc:
        raise ModelChoiceError(f"{what}: {exc}") from None


_FROM_RUN = "the run's record"
_LIMITS = ("call_timeout", "allow_unconstrained", "max_reply_mib", "engine")
"""The transport settings that every source may set, each read the same way (:func:`_limit`)."""


@dataclass
class _Sources:
    """Where one resolution reads its values, and where each value it took came from (``origin``)."""

    flags: ModelFlags
    rows: Mapping[str, ModelOption]
    environ: Mapping[str, str]
    config: Mapping[str, Any]
    stored: StoredModel | None
    origin: dict[str, str] = field(default_factory=dict)

    @property
    def record(self) -> StoredModel:
        return self.stored or StoredModel()

    def pick(self, name: str, *candidates: tuple[Any, str | None]) -> Any:
        """The first candidate value that is set, its source kept in ``origin``."""
        for value, source in candidates:
            if value is not None and value != "":
                self.origin[name] = source or ""
                return value
        return None

    def flag(self, name: str) -> tuple[Any, str]:
        return getattr(self.flags, self.rows[name].field, None), "flag"

    def env(self, name: str) -> tuple[Any, str]:
        variable = self.rows[name].env
        return (self.environ.get(variable) or None if variable else None), variable or ""

    def conf(self, name: str) -> tuple[Any, str]:
        key = self.rows[name].config_key
        return (self.config.get(key) if key else None), "config file"

    def default(self, name: str) -> tuple[Any, str]:
        return self.rows[name].default, "default"

    def read(self, name: str, value: Any) -> Any:
        """``value`` through its option's rule; a bad one is one line naming where it came from."""
        row = self.rows[name]
        try:
            return row.rule.read(value)
        except BadValue as exc:
            raise ModelChoiceError(f"{row.named(self.origin.get(name, name))} {exc}") from None


def _server(sources: _Sources) -> tuple[str, str | None]:
    """The backend, and the server when it is ``endpoint``: a stored run keeps its own backend, a new
    one is on a server when one is named anywhere."""
    flags, record = sources.flags, sources.record
    endpoint = sources.pick(
        "endpoint",
        (flags.endpoint, flags.endpoint_source),
        sources.env("endpoint"),
        sources.conf("endpoint"),
        (record.endpoint, _FROM_RUN),
    )
    if sources.stored is not None:
        backend = sources.pick(
            "backend",
            sources.flag("backend"),
            (record.backend, _FROM_RUN),
            ("endpoint" if flags.endpoint else None, "flag"),
            sources.default("backend"),
        )
    else:
        backend = sources.pick(
            "backend",
            sources.flag("backend"),
            ("endpoint" if endpoint else None, sources.origin.get("endpoint")),
            sources.default("backend"),
        )
    if backend != "endpoint":
        sources.origin.pop("endpoint", None)
        return backend, None
    return backend, endpoint


def _model(sources: _Sources, backend: str) -> str | None:
    """The flag's model, else a stored run's own; a new run on a server takes the environment's or the file's."""
    recorded = ((sources.record.model, _FROM_RUN),) if sources.stored is not None else ()
    fresh = (sources.env("model"), sources.conf("model")) if backend == "endpoint" and sources.stored is None else ()
    return sources.pick("model", sources.flag("model"), *recorded, *fresh)


def _api_key(sources: _Sources, endpoint: str | None) -> str | None:
    """The key, sent only to the server it was configured for: not to a run's recorded server or a
    grid file's judge elsewhere, unless the user named that server or gave the key as a flag."""
    key = sources.pick("api_key", sources.flag("api_key"), sources.env("api_key"), sources.conf("api_key"))
    named = ("flag", sources.rows["endpoint"].env, "config file")
    if key and sources.origin.get("api_key") != "flag" and sources.origin.get("endpoint") not in named:
        by_env = sources.origin["api_key"] == sources.rows["api_key"].env
        bound = (sources.env if by_env else sources.conf)("endpoint")[0]
        if not same_origin(endpoint, bound):
            sources.origin.pop("api_key")
            return None
    return key


def _limit(sources: _Sources, name: str) -> Any:
    """A transport setting: flag, environment, config file, the run's record, the default."""
    recorded = getattr(sources.record, sources.rows[name].field, None) or None
    return sources.pick(
        name, sources.flag(name), sources.env(name), sources.conf(name), (recorded, _FROM_RUN), sources.default(name)
    )


def run_routing_key(store: Any) -> str:
    """A run's key for a router's sticky routing: the same for every session of the run (its
    folder and creation time), different for every run, revealing neither."""
    import hashlib

    seed = f"{store.run_dir.resolve()}|{store.info().created_at!r}"
    return "run-" + hashlib.sha256(seed.encode()).hexdigest()[:16]


routing_key = run_routing_key  # the name the rest of fabula imports


def same_origin(a: str | None, b: str | None) -> bool:
    """Whether two server URLs are one origin (scheme, host and port; path, credentials and case
    aside): a key configured for one is sent to the other only then."""
    from urllib.parse import urlsplit

    def origin(url: str) -> tuple[str, str, int | None]:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        return scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(scheme)

    if not a or not b:
        return False
    try:
        return origin(a) == origin(b)
    except ValueError:
        return False


def redact_url(url: str | None) -> str | None:
    """A URL with user:password and query values shown as ``***`` (``agent.llm.http``'s rule)."""
    from agent.llm.http import redact_url as redact

    return None if url is None else redact(url)


__all__ = [
    "LLMOptions",
    "ModelChoiceError",
    "ModelFlags",
    "RoleChoice",
    "StoredModel",
    "redact_url",
    "register_backend",
    "resolve",
    "routing_key",
    "same_origin",
]
