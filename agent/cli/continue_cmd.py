"""``fabula continue RUN --words N [--prompt TEXT] [--plan-only]``: a finished book goes on.

Everything that can refuse (the run, the length, the premise, the server) is checked before the
run is touched, so a refusal is one line, exit 2, nothing written. The new chapters' outline is
planned (``agent.nst.revise.continuation``) and stored in one transaction; NstAgent then writes them as
``fabula resume`` does, which is also how an interrupted ``continue`` goes on. ``--plan-only``
stops after the outline: ``fabula outline RUN [--edit]`` shows or changes it.
"""

from __future__ import annotations

import argparse
import sys

from agent.cli.derive_cmd import derived_on
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
from agent.cli.rundir import open_run, store_errors
from agent.errors import InputError


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "continue",
        help="write new chapters after the last one of a finished or imported book",
        description="Plan the next chapters of a finished NstAgent run or an imported book "
        "(derived first: fabula derive) from its premise, its final state with the open future "
        "requirements and the end of its last chapters, then write them with NstAgent, search "
        "covering the whole book. The existing chapters are never changed.",
    )
    parser.add_argument("run_dir", metavar="RUN", help="a completed nst run, or an imported book with a derived state")
    parser.add_argument("--words", type=int, required=True, metavar="N", help="words to add")
    parser.add_argument(
        "--prompt",
        "--premise",
        dest="premise",
        metavar="TEXT",
        help="where the book goes now (default: the run's premise or prompt); --prompt as in write, "
        "fork and sequel (--premise is kept as its old name)",
    )
    parser.add_argument(
        "--plan-only",
        action="store_true",
        help="stop once the new chapters' outline is stored: "
        "see or change it with fabula outline RUN [--edit], then write them with fabula resume RUN",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="a setting of the new chapters (VALUE is JSON, else a string), e.g. --set max_turns=8",
    )
    parser.add_argument("--quiet", action="store_true", help="no live progress line")
    add_review_option(parser)
    add_drafts_options(parser)
    parser.add_argument(
        "--style",
        metavar="FILE",
        help="a sample of your own prose: the new chapters are written "
        "in its voice (and measured against it); default: the run's own sample, if it has one",
    )
    add_model_options(parser, stored="RUN")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from agent import pipelines
    from agent.cli.voice_inputs import style_guide
    from agent.llm.options import LLMOptions
    from agent.nst.plan.planner import PlanError
    from agent.nst.revise.continuation import check_continuable, new_config, plan_more
    from agent.settings import parse_assignments

    guide = style_guide(args.style) if args.style else None  # checked before the run is touched
    with open_run(args.run_dir, readonly=False) as store:
        if store.live_status() == "running":
            raise CLIError(f"{args.run_dir} is being written by another process", exit_code=1)
        refuse_in_review(store, args.run_dir)
        review_of(args)  # a bad --review, --drafts or --lint-avoid: refused before anything changes
        drafts_setting(args)
        lint_avoid_setting(args, store.info().config.get("profile"))
        try:
            found = check_continuable(store, args.words, args.premise)
            overrides = parse_assignments(args.overrides)
            new_config(store, found, args.words, args.premise, LLMOptions(), overrides)  # checked before the model
        except InputError as exc:
            raise CLIError(str(exc)) from None
        stored = derived_on(store) if found.imported else pipelines.stored_model(store)
        if guide is not None:
            store.plans.put("style", guide)
        options, model = open_client(choose_model(args, stored=stored))
        try:
            print(
                f"fabula: planning {args.words} more words after chapter {store.info().last_unit} of "
                f"{args.run_dir} with {options.describe()}",
                file=sys.stderr,
            )
            try:
                with store_errors():
                    new = plan_more(
                        store,
                        options,
                        model,
                        words=args.words,
                        premise=args.premise,
                        events=ProgressDisplay(quiet=args.quiet),
                        overrides=overrides,
                    )
            except PlanError as exc:
                raise CLIError(f"{exc}; nothing was stored", exit_code=1) from None
            for item in new:
                print(f"  chapter {item['id']}: {item['title']} ({item['target_words']} words)", file=sys.stderr)
            if args.plan_only:
                print(f"{args.run_dir}: {len(new)} new chapter(s) planned, none written")
                print(f"next: fabula outline {args.run_dir}    (print it; --edit to change it)")
                print(f"      fabula resume {args.run_dir}    (write the new chapters)")
                return 0
            apply_review(store, args)
            with store_errors():
                pipelines.resume(
                    store, llm=options, model=model, events=ProgressDisplay(unit_name="chapter", quiet=args.quiet)
                )
        finally:
            model.close()
        after = store.info()
        waiting = review_lines(store, args.run_dir)
    if waiting:
        print("\n".join(waiting))
        return 0
    print(f"{args.run_dir}: {after.status} at chapter {after.last_unit} of {after.target_units}")
    print_if_done(args.run_dir, after.status)
    return 0 if after.status == "completed" else 1
