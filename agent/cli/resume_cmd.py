"""``fabula resume RUN_DIR``: continue a run from its last committed unit, on the server it was
written on unless told otherwise (``agent.cli.options``: flag, environment, config file, the
run's record). Everything that can refuse (the run's state, a changed configuration, a server
that cannot be reached) is checked before the run is touched, so a refusal leaves its status
as it was."""

from __future__ import annotations

import argparse
import sys

from agent.cli.errors import CLIError
from agent.cli.next_step import print_if_done
from agent.cli.options import add_model_options, choose_model, open_client
from agent.cli.progress import ProgressDisplay
from agent.cli.review_cmd import (
    add_drafts_options,
    add_review_option,
    apply_review,
    drafts_setting,
    lint_avoid_setting,
    refuse_in_review,
    review_lines,
    review_of,
)
from agent.cli.rundir import open_run
from agent.settings import parse_assignments


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "resume",
        help="continue a run from its last committed chapter or step",
        description="Continue a run on the model and server it was written on. A configuration "
        "that differs from the stored one (model, settings, pipeline version) is refused unless "
        "--force; a moved server (--endpoint) is not a change.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run's folder")
    parser.add_argument("--force", action="store_true", help="resume even if the configuration changed")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="change one configuration value (VALUE is JSON, else a string); needs --force",
    )
    parser.add_argument("--quiet", action="store_true", help="no live progress line")
    add_review_option(parser, off=True)
    add_drafts_options(parser)
    add_model_options(parser, stored="the run")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent import pipelines

    overrides = parse_assignments(args.overrides)
    with open_run(args.run_dir, readonly=False) as store:
        info = store.info()
        if store.live_status() == "running":
            raise CLIError(f"{args.run_dir} is still running in another process", exit_code=1)
        refuse_in_review(store, args.run_dir)
        review_of(args)  # a bad --review or --drafts value: refused before anything changes
        drafts_setting(args)
        lint_avoid_setting(args, info.config.get("profile"))
        if info.status == "completed" and overrides:
            pipelines.get(info.pipeline).configure({**info.config, **overrides}, pipelines.LLMOptions())
            raise CLIError(
                f"{args.run_dir} is completed: --set changes nothing there; continue a copy with "
                f"changed settings: fabula fork {args.run_dir} --at N --out NEW --set ..."
            )
        plan = pipelines.plan_resume(
            store, overrides=overrides, llm=choose_model(args, stored=pipelines.stored_model(store))
        )
        if _finish_reconcile(store, args, plan.llm) != 0:
            return 1
        if info.status == "completed":
            print(f"{args.run_dir}: already completed ({info.last_unit} {info.unit_kind}s); nothing to do")
            return 0
        if plan.changes and not args.force:
            raise pipelines.ConfigChangedError(plan.changes)
        llm, model = open_client(plan.llm)
        apply_review(store, args)
        try:
            print(
                f"fabula: resuming {args.run_dir} at {info.unit_kind} {info.last_unit + 1} with {llm.describe()}",
                file=sys.stderr,
            )
            plan = pipelines.resume(
                store,
                overrides=overrides,
                llm=plan.llm,
                force=args.force,
                model=model,
                events=ProgressDisplay(unit_name=info.unit_kind, quiet=args.quiet),
            )
        finally:
            model.close()
        if plan.changes:
            print(
                "resumed with a changed configuration: " + "; ".join(c.describe() for c in plan.changes),
                file=sys.stderr,
            )
        after = store.info()
        waiting = review_lines(store, args.run_dir)
    if waiting:
        print("\n".join(waiting))
        return 0
    print(
        f"{args.run_dir}: {after.status} at {after.unit_kind} {after.last_unit}"
        + (f" of {after.target_units}" if after.target_units is not None else "")
    )
    print_if_done(args.run_dir, after.status)
    return 0 if after.status == "completed" else 1


def _finish_reconcile(store, args: argparse.Namespace, llm) -> int:
    """An interrupted ``fabula reconcile`` is finished before anything is written from the states it
    changes (0: none pending, or finished now; 1: it stopped again)."""
    from agent.cli.reconcile_cmd import finish
    from agent.nst.revise.reconcile import unfinished

    pending = unfinished(store)
    if pending is None:
        return 0
    return finish(store, args.run_dir, pending, llm)
