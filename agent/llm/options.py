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
  record; a new run takes the environment, then the config file, then the embedded default.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from agent.llm.base import LLM

Purpose = Literal["writer", "judge"]
ENV = {"writer": {"endpoint": "FABULA_ENDPOINT", "model": "FABULA_MODEL", "api_key": "FABULA_API_KEY",
                  "call_timeout": "FABULA_CALL_TIMEOUT", "allow_unconstrained": "FABULA_ALLOW_UNCONSTRAINED",
                  "max_reply_mib": "FABULA_MAX_REPLY_MIB", "engine": "FABULA_EMBEDDED_ENGINE"},
       "judge": {"endpoint": "FABULA_JUDGE_ENDPOINT", "model": "FABULA_JUDGE_MODEL",
                 "api_key": "FABULA_JUDGE_API_KEY", "call_timeout": "FABULA_CALL_TIMEOUT",
                 "allow_unconstrained": "FABULA_ALLOW_UNCONSTRAINED", "max_reply_mib": "FABULA_MAX_REPLY_MIB",
                 "engine": "FABULA_EMBEDDED_ENGINE"}}
"""The environment variables each purpose reads (judges share the transport limits)."""
CONFIG_KEYS = {"writer": {"endpoint": "endpoint", "model": "model", "api_key": "api_key",
                          "call_timeout": "call_timeout", "allow_unconstrained": "allow_unconstrained",
                          "engine": "embedded_engine"},
               "judge": {"endpoint": "judge_endpoint", "model": "judge_model", "api_key": "judge_api_key",
                         "call_timeout": "call_timeout", "allow_unconstrained": "allow_unconstrained",
                         "engine": "embedded_engine"}}
"""The config file's keys each purpose reads (``agent.config_file`` defines and checks them)."""
DEFAULT_CALL_TIMEOUT_S = 600.0
MAX_CALL_TIMEOUT_S = 86400.0
DEFAULT_MAX_REPLY_MIB = 32.0
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


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
    origin: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)
    """Where each resolved value came from (``flag``, an environment variable, ``config file``,
    ``the run's record``, ``default``): what ``describe`` and ``fabula config show`` say."""

    def fingerprinted(self) -> dict[str, Any]:
        return {"backend": self.backend, "model": self.model, "thinking": self.thinking or "off"}

    def transport(self) -> dict[str, Any]:
        """What a session records about how it reached the model (no credentials): a later
        ``resume`` finds the same server from it."""
        record: dict[str, Any] = {"backend": self.backend, "endpoint": redact_url(self.endpoint), "model": self.model}
        if self.allow_unconstrained:
            record["allow_unconstrained"] = True
        return record

    def describe(self) -> str:
        """One line for the terminal: backend, endpoint (credentials removed), model, and where
        the endpoint came from when it was not given on the command line."""
        model = self.model or ("the embedded default" if self.backend == "embedded" else "the server's only model")
        where = f" at {redact_url(self.endpoint)}" if self.backend == "endpoint" and self.endpoint else ""
        source = self.origin.get("endpoint") if where else None
        return f"backend {self.backend}{where}, model {model}" + (f" (endpoint from {source})"
                                                                    if source and source != "flag" else "")

    def open(self, store: Any = None, *, probe: Literal["off", "light", "full"] = "full",
             routing_key: str | None = None) -> LLM:
        """Open the model (one client); with ``store``, its calls are recorded in the run's ledger
        and the client is the run's (:meth:`attach_run`)."""
        if routing_key is None and store is not None and self.backend == "endpoint":
            routing_key = run_routing_key(store)
        llm = self._build(probe, routing_key)
        if store is not None:
            llm.recorders.append(store.recorder)
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
            store.record_server_probe(probe.as_dict())

    def _build(self, probe: Literal["off", "light", "full"], key: str | None) -> LLM:
        from agent.llm.types import LLMSetupError

        factory = _BACKENDS.get(self.backend or "")
        if factory is not None:
            return factory(self, probe, key)
        if self.backend == "endpoint":
            if not self.endpoint:
                raise LLMSetupError("the endpoint backend needs --endpoint URL (or FABULA_ENDPOINT, or endpoint in "
                                    "the config file)")
            from agent.llm.endpoint import EndpointLLM

            return EndpointLLM(self.endpoint, self.model, api_key=self.api_key, thinking=self.thinking or "off",
                               timeout_s=self.call_timeout_s, probe=probe,
                               allow_unconstrained=self.allow_unconstrained,
                               max_response_bytes=max(int(self.max_reply_mib * 2**20), 1024), routing_key=key)
        if self.backend == "embedded":
            from agent.llm.embedded_engines import open_embedded

            return open_embedded(self.model, thinking=self.thinking or "off", engine=self.engine)  # type: ignore[arg-type]
        raise LLMSetupError(f"unknown backend {self.backend!r}; use embedded or endpoint")


BackendFactory = Callable[[LLMOptions, str, "str | None"], "LLM"]
_BACKENDS: dict[str, BackendFactory] = {}


def register_backend(name: str, factory: BackendFactory) -> None:
    """Add a backend beside ``embedded`` and ``endpoint``: ``factory(options, probe, routing_key)``
    opens it (a test's scripted model, a backend a plugin brings). A run stored with that backend
    name resumes on it."""
    _BACKENDS[name] = factory


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

    @classmethod
    def of(cls, options: LLMOptions) -> ModelFlags:
        """An already chosen model, taken as if every field of it had been given (Python callers)."""
        return cls(options.backend, options.endpoint, options.model, options.api_key, options.thinking,
                   options.call_timeout_s if options.call_timeout_s != DEFAULT_CALL_TIMEOUT_S else None,
                   options.allow_unconstrained or None)


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

    @classmethod
    def from_record(cls, llm: Mapping[str, Any] | None, transport: Mapping[str, Any] | None = None, *,
                    backend: str | None = None, model: str | None = None) -> StoredModel:
        llm = llm if isinstance(llm, Mapping) else {}
        transport = transport if isinstance(transport, Mapping) else {}
        endpoint = transport.get("endpoint") or llm.get("endpoint")
        endpoint = endpoint if isinstance(endpoint, str) and endpoint else None
        usable = endpoint if endpoint is None or "***" not in endpoint else None
        return cls(backend=llm.get("backend") or backend, model=llm.get("model") or model,
                   thinking=llm.get("thinking"), endpoint=usable,
                   allow_unconstrained=bool(transport.get("allow_unconstrained")),
                   redacted_endpoint=endpoint if usable is None and endpoint else None)


def resolve(flags: ModelFlags | None = None, *, purpose: Purpose = "writer",
            environ: Mapping[str, str] | None = None, config: Mapping[str, Any] | None = None,
            stored: StoredModel | None = None) -> LLMOptions:
    """The one model resolution (see the module's docstring for the order).

    ``environ``: the environment to read (``None``: none; the CLI passes ``os.environ``);
    ``config``: the config file's values; ``stored``: the run's record, for a command that
    continues a run."""
    flags = flags or ModelFlags()
    env_names = ENV[purpose]
    env = {key: (environ or {}).get(name) or None for key, name in env_names.items()}
    conf = {key: (config or {}).get(name) for key, name in CONFIG_KEYS[purpose].items()}
    origin: dict[str, str] = {}

    def pick(key: str, *candidates: tuple[Any, str]) -> Any:
        for value, source in candidates:
            if value is not None and value != "":
                origin[key] = source
                return value
        return None

    record = stored or StoredModel()
    endpoint = pick("endpoint", (flags.endpoint, flags.endpoint_source), (env["endpoint"], env_names["endpoint"]),
                    (conf["endpoint"], "config file"), (record.endpoint, "the run's record"))
    if stored is not None:
        backend = pick("backend", (flags.backend, "flag"), (stored.backend, "the run's record"),
                       ("endpoint" if flags.endpoint else None, "flag"), ("embedded", "default"))
    else:
        backend = pick("backend", (flags.backend, "flag"), ("endpoint" if endpoint else None, origin.get("endpoint")),
                       ("embedded", "default"))
    if backend != "endpoint":
        endpoint = None
        origin.pop("endpoint", None)
    fresh_model = (env["model"], env_names["model"]), (conf["model"], "config file")
    model = pick("model", (flags.model, "flag"), *(((stored.model, "the run's record"),) if stored else ()),
                 *(fresh_model if backend == "endpoint" and stored is None else ()))
    thinking = pick("thinking", (flags.thinking, "flag"), (record.thinking, "the run's record"),
                    ("off", "default"))
    api_key = None
    if backend == "endpoint":
        api_key = pick("api_key", (flags.api_key, "flag"), (env["api_key"], env_names["api_key"]),
                       (conf["api_key"], "config file"))
        named = ("flag", env_names["endpoint"], "config file")
        if api_key and origin.get("api_key") != "flag" and origin.get("endpoint") not in named:
            bound = env["endpoint"] if origin["api_key"] == env_names["api_key"] else conf["endpoint"]
            if not same_origin(endpoint, bound):  # a run's recorded server, a grid file's judge: not the key's
                api_key = None
                origin.pop("api_key")
    timeout = pick("call_timeout", (flags.call_timeout_s, "flag"), (env["call_timeout"], env_names["call_timeout"]),
                   (conf["call_timeout"], "config file"), (DEFAULT_CALL_TIMEOUT_S, "default"))
    unconstrained = pick("allow_unconstrained", (flags.allow_unconstrained, "flag"),
                         (env["allow_unconstrained"], env_names["allow_unconstrained"]),
                         (conf["allow_unconstrained"], "config file"),
                         (True if record.allow_unconstrained else None, "the run's record"), (False, "default"))
    cap = pick("max_reply_mib", (env["max_reply_mib"], env_names["max_reply_mib"]),
               (DEFAULT_MAX_REPLY_MIB, "default"))
    engine = pick("engine", (env["engine"], env_names["engine"]), (conf["engine"], "config file"), ("auto", "default"))
    from agent.llm.types import EMBEDDED_ENGINES

    if engine not in EMBEDDED_ENGINES:
        raise ModelChoiceError(f"{origin['engine']}: the embedded engine must be one of {', '.join(EMBEDDED_ENGINES)}, "
                               f"got {engine!r}")
    if backend == "endpoint" and not endpoint and record.redacted_endpoint:
        raise ModelChoiceError(f"this run's server ({record.redacted_endpoint}) was reached with credentials in its "
                               "URL, which are never stored: give --endpoint URL")
    return LLMOptions(backend, model, thinking, endpoint, api_key,
                      call_timeout_s=seconds(timeout, origin.get("call_timeout", "call_timeout")),
                      allow_unconstrained=boolean(unconstrained, origin.get("allow_unconstrained", "")),
                      max_reply_mib=positive(cap, origin.get("max_reply_mib", "")), engine=engine, origin=origin)


def seconds(value: Any, source: str) -> float:
    """A call timeout: seconds, > 0 and at most a day (one rule for flag, environment and file)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ModelChoiceError(f"{source}: the call timeout must be a number of seconds, got {value!r}") from None
    if not math.isfinite(number) or not 0 < number <= MAX_CALL_TIMEOUT_S:
        raise ModelChoiceError(f"{source}: the call timeout must be between 0 and {MAX_CALL_TIMEOUT_S:.0f} seconds, "
                               f"got {value}")
    return number


def positive(value: Any, source: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ModelChoiceError(f"{source} must be a number, got {value!r}") from None
    if not math.isfinite(number) or number <= 0:
        raise ModelChoiceError(f"{source} must be a positive number, got {value}")
    return number


def boolean(value: Any, source: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ModelChoiceError(f"{source} must be true or false (1/0, yes/no), got {value!r}")


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


__all__ = ["ENV", "LLMOptions", "ModelChoiceError", "ModelFlags", "StoredModel", "redact_url", "register_backend",
           "resolve", "routing_key", "same_origin"]
