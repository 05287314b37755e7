"""The user's config file, ``$FABULA_HOME/config.toml`` (or ``$FABULA_CONFIG``): the defaults a
writer would otherwise export in every shell — the server, the model, the profile, the judge,
the call timeout.

Read with :mod:`tomllib` into one typed :class:`FabulaConfig` (unknown keys and bad values are
one line naming the file), written back by ``fabula config set`` atomically. Its values take
part in model resolution below flags and the environment (``agent.llm.options.resolve``).
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
import tomllib
import unicodedata
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent import keyvalue
from agent.cli.errors import CLIError
from agent.text import read_capped

MAX_CONFIG_BYTES = 1 << 20
PROFILES = ("auto", "default", "small", "paper")


@dataclass(frozen=True)
class Key:
    """One config key: its type, what it means, and the environment variable that beats it."""

    kind: type
    help: str
    env: str | None = None
    secret: bool = False


KEYS: dict[str, Key] = {
    "endpoint": Key(str, "the writer's server base URL", "FABULA_ENDPOINT"),
    "model": Key(str, "the model name on that server", "FABULA_MODEL"),
    "api_key": Key(str, "the bearer token for that server", "FABULA_API_KEY", secret=True),
    "profile": Key(str, "auto (a tiny model gets small), default, small or paper", None),
    "call_timeout": Key(float, "seconds one model call may take on a server, retries included", "FABULA_CALL_TIMEOUT"),
    "allow_unconstrained": Key(bool, "use a server that does not enforce JSON schemas (parse, validate, re-ask)",
                               "FABULA_ALLOW_UNCONSTRAINED"),
    "embedded_engine": Key(str, "the embedded model's engine: auto (llama.cpp where installed), llama.cpp or "
                           "transformers", "FABULA_EMBEDDED_ENGINE"),
    "judge_endpoint": Key(str, "the judges' server base URL", "FABULA_JUDGE_ENDPOINT"),
    "judge_model": Key(str, "the judge model's name", "FABULA_JUDGE_MODEL"),
    "judge_api_key": Key(str, "the bearer token for the judges' server", "FABULA_JUDGE_API_KEY", secret=True),
}


@dataclass(frozen=True)
class FabulaConfig:
    """The config file's values (only the keys it sets) and where it lives."""

    path: Path
    values: Mapping[str, Any] = field(default_factory=dict)

    @property
    def profile(self) -> str | None:
        return self.values.get("profile")


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("FABULA_CONFIG"):
        return Path(env["FABULA_CONFIG"]).expanduser()
    from agent.weights.home import fabula_home

    return fabula_home() / "config.toml"


def load(path: Path | None = None) -> FabulaConfig:
    """The config file's values, checked; an absent file is an empty config."""
    path = path or config_path()
    if not path.exists():
        return FabulaConfig(path)
    try:
        raw = read_capped(path, MAX_CONFIG_BYTES).decode("utf-8")
        data = tomllib.loads(raw)
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read the config file {path}: {exc}") from exc
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        raise CLIError(f"the config file {path} is not valid TOML: {str(exc).splitlines()[0] if str(exc) else exc}") \
            from None
    return FabulaConfig(path, {key: check(key, value, where=str(path)) for key, value in data.items()})


def check(key: str, value: Any, *, where: str) -> Any:
    """``value`` as ``key`` takes it, or one line saying why not."""
    spec = KEYS.get(key)
    if spec is None:
        raise CLIError(f"{where}: unknown key {key!r}; known: {', '.join(KEYS)}")
    if spec.kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes", "on", "false", "0", "no", "off"):
            return text in ("true", "1", "yes", "on")
        raise CLIError(f"{where}: {key} must be true or false, got {value!r}")
    if spec.kind is float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise CLIError(f"{where}: {key} must be a number of seconds, got {value!r}") from None
        if isinstance(value, bool) or not math.isfinite(number) or not 0 < number <= 86400:
            raise CLIError(f"{where}: {key} must be between 0 and 86400 seconds, got {value!r}")
        return number
    if not isinstance(value, str) or not value.strip() or len(value) > 4096 or any(
            unicodedata.category(c) == "Cc" for c in value):
        raise CLIError(f"{where}: {key} must be a non-empty one-line string without control characters, "
                       f"got {json.dumps(_shown(key, value))[:80]}")
    if key == "profile" and value not in PROFILES:
        raise CLIError(f"{where}: profile must be one of {', '.join(PROFILES)}, got {value!r}")
    if key == "embedded_engine":
        from agent.llm.types import EMBEDDED_ENGINES

        if value not in EMBEDDED_ENGINES:
            raise CLIError(f"{where}: embedded_engine must be one of {', '.join(EMBEDDED_ENGINES)}, got {value!r}")
    if key.endswith("endpoint"):
        from agent.llm.http import normalize_base_url

        try:
            normalize_base_url(value)  # the rule every server URL meets before a request
        except ValueError as exc:
            raise CLIError(f"{where}: {key}: {exc}") from None
    return value


def _shown(key: str, value: Any) -> Any:
    """A value as it may be printed: a secret never, a URL without its credentials."""
    if KEYS[key].secret:
        return "***"
    if key.endswith("endpoint") and isinstance(value, str):
        from agent.llm.http import redact_url

        return redact_url(value)
    return value


def shown(key: str, value: Any) -> Any:
    """:func:`_shown` for the commands that print config values (``config set``/``show``)."""
    return _shown(key, value) if key in KEYS else value


@contextmanager
def changing(key: str, path: Path | None = None) -> Iterator[tuple[Path, dict[str, Any]]]:
    """``(path, values)`` to change under a lock (concurrent ``config set``s lose nothing); the
    values as written, unchecked, so a damaged key can always be set or unset again: a line that
    is not TOML is dropped when it is ``key``'s own and refused (naming the line) otherwise."""
    from filelock import FileLock, Timeout

    path = path or config_path()
    target = Path(os.path.realpath(path))
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(target) + ".lock", timeout=30)
        with lock:
            yield target, _lines(target, key)
    except Timeout:
        raise CLIError(f"the config file {path} is being changed by another command; try again", exit_code=1) \
            from None
    except OSError as exc:
        raise CLIError(f"cannot change the config file {path}: {exc.strerror or exc}", exit_code=1) from exc


def _lines(path: Path, key: str) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        raw = read_capped(path, MAX_CONFIG_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        raise CLIError(f"cannot read the config file {path}: {exc}") from exc
    values: dict[str, Any] = {}
    for number, line in enumerate(raw.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            values.update(tomllib.loads(line))
        except (tomllib.TOMLDecodeError, RecursionError):
            if keyvalue.line_key(line) != key:
                raise CLIError(f"the config file {path}, line {number}, is not valid TOML; fabula config unset "
                               f"{keyvalue.line_key(line)[:40]} removes it") from None
    return values


def save(path: Path, values: Mapping[str, Any]) -> None:
    """Write ``values`` as the whole file at ``path`` (a symlinked config.toml: at its target),
    atomically through a fresh temporary file (never a planted ``config.toml.tmp`` link): a crash
    leaves the old file or the new one. Keys fabula does not know are kept as they were."""
    lines = ["# fabula's settings (fabula config set KEY VALUE); flags and environment variables beat them"]
    lines += [f"{key} = {_toml(values[key])}" for key in KEYS if key in values]
    lines += [f"{json.dumps(key)} = {_toml(value)}" for key, value in values.items() if key not in KEYS]
    target = Path(os.path.realpath(path))
    try:
        mode = stat.S_IMODE(target.stat().st_mode) if target.exists() else 0o644
        if any(k in KEYS and KEYS[k].secret for k in values):
            mode &= 0o700
        fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(temporary, mode)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise CLIError(f"cannot write the config file {path}: {exc.strerror or exc}", exit_code=1) from exc


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, int):
        return str(value)
    # a JSON string is a TOML basic string; DEL, which JSON leaves as it is and TOML refuses, escaped
    return json.dumps(str(value), ensure_ascii=False).replace("\x7f", "\\u007f")
