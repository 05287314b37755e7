"""``fabula approve RUN``: a run in review (``--review``) goes on, the outline or chapter it waits on
approved. Its own module because it ends by resuming the run, and ``resume`` takes the review options
of ``agent.cli.review_cmd`` (one direction of import each)."""

from __future__ import annotations

import argparse
import sys

from agent.cli import resume_cmd
from agent.cli.errors import CLIError
from agent.cli.options import add_model_options
from agent.cli.rundir import open_run
from agent.errors import InputError
from agent.store.writer.review import approve, set_review


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "approve",
        help="approve the chapter (or outline) a run in review waits on; write on",
        description="Record the writer's approval of what a run in review waits on (the "
        "outline, or the last committed chapter) and write on to the next review (or the end, "
        "with --no-review); --stop records the approval only.",
    )
    parser.add_argument("run_dir", metavar="RUN", help="a run in review")
    parser.add_argument("--stop", action="store_true", help="approve only; do not write on")
    parser.add_argument("--no-review", action="store_true", help="stop reviewing: write on to the end")
    parser.add_argument("--quiet", action="store_true", help="no live progress line")
    add_model_options(parser, stored="RUN")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    with open_run(args.run_dir, readonly=False) as store:
        if store.live_status() == "running":
            raise CLIError(f"{args.run_dir} is being written by another process", exit_code=1)
        try:
            entry = approve(store)
        except InputError as exc:
            raise CLIError(str(exc)) from None
        if args.no_review:
            set_review(store, None)
        what = "the outline" if entry["unit"] == 0 else f"chapter {entry['unit']}"
        print(f"fabula: {what} approved", file=sys.stderr)
        if args.stop:
            print(f"next: fabula resume {args.run_dir}    (write on)")
            return 0
    args.force, args.overrides, args.review, args.no_review = False, [], None, False
    return resume_cmd.run(args)
