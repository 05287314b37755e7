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
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    from serve.home import fabula_home

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
    if not isinstance(value, str) or not value.strip() or any(ord(c) < 32 for c in value) or len(value) > 4096:
        raise CLIError(f"{where}: {key} must be a non-empty one-line string, got {json.dumps(value)[:80]}")
    if key == "profile" and value not in PROFILES:
        raise CLIError(f"{where}: profile must be one of {', '.join(PROFILES)}, got {value!r}")
    if key.endswith("endpoint") and not value.startswith(("http://", "https://")):
        raise CLIError(f"{where}: {key} must be an http:// or https:// URL, got {value!r}")
    return value


def save(config: FabulaConfig, values: Mapping[str, Any]) -> None:
    """Write ``values`` as the whole file (atomically: a crash leaves the old file or the new one)."""
    lines = ["# fabula's settings (fabula config set KEY VALUE); flags and environment variables beat them"]
    for key in KEYS:
        if key in values:
            lines.append(f"{key} = {_toml(values[key])}")
    path = config.path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(path.name + ".tmp")
        temporary.write_text("\n".join(lines) + "\n", encoding="utf-8")
        if any(KEYS[k].secret for k in values):
            temporary.chmod(0o600)
        temporary.replace(path)
    except OSError as exc:
        raise CLIError(f"cannot write the config file {path}: {exc.strerror or exc}", exit_code=1) from exc


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
