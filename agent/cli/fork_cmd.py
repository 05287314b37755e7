"""``fabula fork RUN --at N --out NEW [--set KEY=VALUE ...] [--prompt TEXT]``: a new run that
shares units 1..N with RUN and continues from N+1 with changed settings or prompt; RUN is
never written."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agent.cli.errors import CLIError
from agent.cli.next_step import print_if_done
from agent.cli.options import add_model_options, choose_model, open_client
from agent.cli.progress import ProgressDisplay
from agent.cli.rundir import open_run, store_errors
from agent.settings import parse_assignments
from agent.store.lineage.fork import fork_run


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "fork",
        help="a new run sharing chapters/steps 1..N, continued with other settings",
        description="Copy units 1..N of RUN (text, versions, state, ledger) into NEW, change "
        "settings or the prompt, and continue NEW from N+1. RUN is opened read-only.",
    )
    parser.add_argument("run_dir", metavar="RUN", help="the run to fork (opened read-only)")
    parser.add_argument("--at", type=int, required=True, metavar="N", help="keep units 1..N (0: only the plan)")
    parser.add_argument(
        "-o", "--out", required=True, metavar="NEW", help="directory of the new run (must not hold one)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="change one configuration value (VALUE is JSON, else a string)",
    )
    parser.add_argument("--prompt", metavar="TEXT", help="a new story prompt (NstAgent: prompt; Magnet: premise)")
    parser.add_argument(
        "--no-run", action="store_true", help="only create the fork; continue later with `fabula resume NEW`"
    )
    parser.add_argument("--quiet", action="store_true", help="no live progress line")
    add_model_options(parser, stored="RUN")
    parser.set_defaults(handler=run)


def with_prompt(config: dict[str, Any], overrides: dict[str, Any], prompt: str) -> dict[str, Any]:
    """The override that sets the story prompt: ``prompt`` (NstAgent family) or the Magnet premise."""
    story = overrides.get("story", config.get("story"))
    if isinstance(story, dict):
        return {**overrides, "story": {**story, "premise": prompt}}
    if "prompt" not in config:
        raise CLIError("this run's configuration has no prompt to replace; use --set")
    return {**overrides, "prompt": prompt}


def run(args: argparse.Namespace) -> int:
    from agent import pipelines

    if not args.prompt and args.prompt is not None:
        raise CLIError("--prompt is empty")
    overrides = parse_assignments(args.overrides)
    with open_run(args.run_dir) as source:
        if args.prompt:
            overrides = with_prompt(source.info().config, overrides, args.prompt)
        with store_errors():
            plan = pipelines.plan_resume(
                source, overrides=overrides, llm=choose_model(args, stored=pipelines.stored_model(source))
            )
        model = None if args.no_run else open_client(plan.llm)[1]  # before the fork exists: a refusal leaves none
        try:
            with store_errors():
                fork = fork_run(source, args.out, at=args.at, config=plan.config)
        except BaseException:
            if model is not None:
                model.close()
            raise
    try:
        with fork:
            unit = fork.info().unit_kind
            print(f"forked {args.run_dir} at {unit} {args.at} into {fork.run_dir}", file=sys.stderr)
            for change in plan.changes:
                print(f"  changed: {change.describe()}", file=sys.stderr)
            if model is None:
                print(f"continue it with: fabula resume {args.out}", file=sys.stderr)
                return 0
            print(f"fabula: continuing {args.out} at {unit} {args.at + 1} with {plan.llm.describe()}", file=sys.stderr)
            with store_errors():
                pipelines.resume(
                    fork, llm=plan.llm, model=model, events=ProgressDisplay(unit_name=unit, quiet=args.quiet)
                )
            after = fork.info()
    finally:
        if model is not None:
            model.close()
    print(
        f"{args.out}: {after.status} at {after.unit_kind} {after.last_unit}"
        + (f" of {after.target_units}" if after.target_units is not None else "")
    )
    print_if_done(args.out, after.status)
    return 0 if after.status == "completed" else 1
