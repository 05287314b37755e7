"""``fabula resume RUN_DIR``: continue a run from its last committed unit."""

from __future__ import annotations

import argparse
import sys

from agent.cli.errors import CLIError
from agent.cli.progress import ProgressDisplay
from agent.cli.rundir import open_run
from agent.llm.options import resolve
from agent.settings import parse_assignments


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


def run(args: argparse.Namespace) -> int:
    from agent import pipelines

    overrides = parse_assignments(args.overrides)
    # stored backend/model/thinking unless given; the transport (endpoint, key) from flags, then environment
    given = resolve(backend=args.backend, endpoint=args.endpoint, model=args.model, api_key=args.api_key,
                    thinking=args.thinking)
    llm = pipelines.LLMOptions(backend=args.backend, model=args.model, thinking=args.thinking,
                               endpoint=given.endpoint, api_key=given.api_key)
    with open_run(args.run_dir, readonly=False) as store:
        info = store.info()
        if info.status == "completed" and overrides:
            pipelines.get(info.pipeline).configure({**info.config, **overrides}, pipelines.LLMOptions())
            raise CLIError(f"{args.run_dir} is completed: --set changes nothing there; continue a copy with "
                           f"changed settings: fabula fork {args.run_dir} --at N --out NEW --set ...")
        if info.status == "completed":
            print(f"{args.run_dir}: already completed ({info.last_unit} {info.unit_kind}s); nothing to do")
            return 0
        if store.live_status() == "running":
            raise CLIError(f"{args.run_dir} is still running in another process", exit_code=1)
        plan = pipelines.plan_resume(store, overrides=overrides, llm=llm)
        if plan.changes and not args.force:
            raise pipelines.ConfigChangedError(plan.changes)
        print(f"fabula: resuming {args.run_dir} at {info.unit_kind} {info.last_unit + 1} with {plan.llm.describe()}",
              file=sys.stderr)
        plan = pipelines.resume(store, overrides=overrides, llm=llm, force=args.force,
                                events=ProgressDisplay(unit_name=info.unit_kind))
        if plan.changes:
            print("resumed with a changed configuration: " + "; ".join(c.describe() for c in plan.changes),
                  file=sys.stderr)
        after = store.info()
    print(f"{args.run_dir}: {after.status} at {after.unit_kind} {after.last_unit}"
          + (f" of {after.target_units}" if after.target_units is not None else ""))
    return 0 if after.status == "completed" else 1
