"""The user's config file, ``$FABULA_HOME/config.toml`` (or ``$FABULA_CONFIG``): the defaults a
writer would otherwise export in every shell — the server, the model, the profile, the judge,
the call timeout.

Read with :mod:`tomllib` into one typed :class:`FabulaConfig` (unknown keys and bad values are
one line naming the file), written back by ``fabula config set`` atomically. Its values take
part in model resolution below flags and the environment (``agent.llm.options.resolve``).
"""

from __future__ import annotations

import json
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
from agent.llm.option_table import MODEL_OPTIONS, ModelOption
from agent.llm.option_values import TEXT, BadValue, OneOf, ValueRule
from agent.text import read_capped

MAX_CONFIG_BYTES = 1 << 20
PROFILES = ("auto", "default", "small", "paper")


@dataclass(frozen=True)
class Key:
    """One config key: what it means, the rule its value follows, and the environment variable that beats it."""

    help: str
    env: str | None = None
    secret: bool = False
    rule: ValueRule = TEXT
    url: bool = False

    @property
    def kind(self) -> type:
        return self.rule.kind

    @classmethod
    def of(cls, row: ModelOption) -> Key:
        """A model option's key, as the option table writes it."""
        return cls(row.about, row.env, row.secret, row.rule, row.url)


def _keys() -> dict[str, Key]:
    """The model options' keys, with the profile after the writer's server keys, where it has always been listed."""
    model = [(row.config_key, Key.of(row)) for row in MODEL_OPTIONS if row.config_key]
    place = [key for key, _ in model].index("api_key") + 1
    return dict(
        [
            *model[:place],
            ("profile", Key("auto (a tiny model gets small), default, small or paper", rule=OneOf(PROFILES))),
            *model[place:],
        ]
    )


KEYS: dict[str, Key] = _keys()


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
        raise CLIError(
            f"the config file {path} is not valid TOML: {str(exc).splitlines()[0] if str(exc) else exc}"
        ) from None
    return FabulaConfig(path, {key: check(key, value, where=str(path)) for key, value in data.items()})


def check(key: str, value: Any, *, where: str) -> Any:
    """``value`` as ``key`` takes it, or one line saying why not."""
    spec = KEYS.get(key)
    if spec is None:
        raise CLIError(f"{where}: unknown key {key!r}; known: {', '.join(KEYS)}")
    if spec.kind is str and (
        not isinstance(value, str)
        or not value.strip()
        or len(value) > 4096
        or any(unicodedata.category(c) == "Cc" for c in value)
    ):
        raise CLIError(
            f"{where}: {key} must be a non-empty one-line string without control characters, "
            f"got {json.dumps(_shown(key, value))[:80]}"
        )
    try:
        value = spec.rule.read(value)
    except BadValue as exc:
        raise CLIError(f"{where}: {key} {exc}") from None
    if spec.url:
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
    if KEYS[key].url and isinstance(value, str):
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
        raise CLIError(f"the config file {path} is being changed by another command; try again", exit_code=1) from None
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
                raise CLIError(
                    f"the config file {path}, line {number}, is not valid TOML; fabula config unset "
                    f"{keyvalue.line_key(line)[:40]} removes it"
                ) from None
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
