"""``fabula resume RUN_DIR``: continue a run from its last committed unit."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from agent.cli.errors import CLIError
from agent.cli.rundir import open_run


def add_parser(sub) -> None:
    parser = sub.add_parser("resume", help="continue a run from its last committed chapter or step",
                            description="Continue a run. A configuration that differs from the stored one "
                            "(model, settings, pipeline version) is refused unless --force.")
    parser.add_argument("run_dir", metavar="RUN_DIR")
    parser.add_argument("--force", action="store_true", help="resume even if the configuration changed")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="change one configuration value (VALUE is JSON, else a string); needs --force")
    group = parser.add_argument_group("model (default: as stored in the run)")
    group.add_argument("--backend", choices=["embedded", "endpoint"])
    group.add_argument("--model", metavar="NAME")
    group.add_argument("--thinking", choices=["off", "on", "auto"])
    group.add_argument("--endpoint", metavar="URL", help="server base URL (env FABULA_ENDPOINT; not part of the "
                       "configuration, so a moved server needs no --force)")
    group.add_argument("--api-key", metavar="KEY", help="bearer token for the server (env FABULA_API_KEY)")
    parser.set_defaults(handler=run)


def parse_overrides(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise CLIError(f"--set needs KEY=VALUE, got {item!r}")
        try:
            out[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip()] = raw
    return out


def run(args: argparse.Namespace) -> int:
    from agent import pipelines

    overrides = parse_overrides(args.overrides)
    llm = pipelines.LLMOptions(backend=args.backend, model=args.model, thinking=args.thinking,
                               endpoint=args.endpoint, api_key=args.api_key)
    with open_run(args.run_dir, readonly=False) as store:
        info = store.info()
        if info.status == "completed":
            print(f"{args.run_dir}: already completed ({info.last_unit} {info.unit_kind}s); nothing to do")
            return 0
        if store.live_status() == "running":
            raise CLIError(f"{args.run_dir} is still running in another process", exit_code=1)
        plan = pipelines.resume(store, overrides=overrides, llm=llm, force=args.force)
        if plan.changes:
            print("resumed with a changed configuration: " + "; ".join(c.describe() for c in plan.changes),
                  file=sys.stderr)
        after = store.info()
    print(f"{args.run_dir}: {after.status} at {after.unit_kind} {after.last_unit}"
          + (f" of {after.target_units}" if after.target_units is not None else ""))
    return 0 if after.status == "completed" else 1
