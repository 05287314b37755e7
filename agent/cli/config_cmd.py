"""``fabula config show|set|unset|path``: the config file, and where each value a command would
use comes from (a flag is not shown: it beats everything, for that one command)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from agent import keyvalue
from agent.cli import config_file
from agent.cli.errors import CLIError
from agent.llm.option_table import DEFAULT_CALL_TIMEOUT_S


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "config",
        help="show or change fabula's config file ($FABULA_HOME/config.toml)",
        description="Defaults for every command: the server, the model, the profile, the judge, "
        "the call timeout. Flags beat the environment, which beats this file.",
    )
    inner = parser.add_subparsers(dest="config_command", required=True, metavar="{show,set,unset,path}")
    show = inner.add_parser("show", help="every key: its value and where it comes from")
    show.add_argument("--json", action="store_true", help="one JSON object: key -> {value, source}")
    show.set_defaults(handler=run_show)
    put = inner.add_parser("set", help="set one key in the config file (checked first)")
    put.add_argument(
        "key", choices=list(config_file.KEYS), metavar="KEY", help="one of: " + ", ".join(config_file.KEYS)
    )
    put.add_argument("value", metavar="VALUE", help="the value (true/false for allow_unconstrained)")
    put.set_defaults(handler=run_set)
    unset = inner.add_parser("unset", help="remove one key from the config file")
    unset.add_argument("key", metavar="KEY", help="the key to remove (also one fabula does not know, to repair a file)")
    unset.set_defaults(handler=run_unset)
    path = inner.add_parser("path", help="print the config file's path")
    path.set_defaults(handler=run_path)


def effective() -> dict[str, dict[str, Any]]:
    """key -> {value, source}: the environment, then the file, then unset."""
    loaded = config_file.load()
    out: dict[str, dict[str, Any]] = {}
    for key, spec in config_file.KEYS.items():
        if spec.env and os.environ.get(spec.env):
            value, source = os.environ[spec.env], spec.env
        elif key in loaded.values:
            value, source = loaded.values[key], f"config file {loaded.path}"
        else:
            value, source = _default(key), "default"
        if value is not None:
            value = config_file.shown(key, value)
        out[key] = {"value": value, "source": source}
    return out


def _default(key: str) -> Any:
    return {"profile": "auto", "call_timeout": DEFAULT_CALL_TIMEOUT_S, "allow_unconstrained": False}.get(key)


def run_show(args: argparse.Namespace) -> int:
    values = effective()
    if args.json:
        print(json.dumps(values, ensure_ascii=False))
        return 0
    width = max(map(len, values))
    for key, item in values.items():
        shown = "(unset)" if item["value"] is None else item["value"]
        print(f"{key:<{width}}  {shown}  [{item['source']}]")
    return 0


def run_set(args: argparse.Namespace) -> int:
    value = config_file.check(args.key, args.value, where=f"config set {args.key}")  # the reader's own rule
    with config_file.changing(args.key) as (path, values):
        config_file.save(path, {**values, args.key: value})
    print(f"{args.key} = {config_file.shown(args.key, value)} in {config_file.config_path()}")
    return 0


def run_unset(args: argparse.Namespace) -> int:
    with config_file.changing(args.key) as (path, values):
        if args.key not in values and not _damaged(path, args.key):
            raise CLIError(f"{args.key} is not set in {config_file.config_path()}")
        config_file.save(path, {k: v for k, v in values.items() if k != args.key})
    print(f"{args.key} removed from {config_file.config_path()}")
    return 0


def _damaged(path, key: str) -> bool:
    """Whether ``key`` has a line in the file that was dropped as unreadable (unset repairs it)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return any(keyvalue.line_key(line) == key for line in text.splitlines())


def run_path(args: argparse.Namespace) -> int:
    print(config_file.config_path())
    return 0
