"""``fabula sequel RUN --out RUN2 [--prompt TEXT] [--words N]``: book two, starting from book one's final
state (``agent.nst.sequel``), its search covering book one (read-only), its export naming the series.

Everything that can refuse (book one, the prompt, the length, --out, --resolve, the server) is
checked before RUN2 is created: one line, exit 2, nothing written. Book two is an ordinary NstAgent
run: ``fabula resume RUN2`` continues it after any stop, ``--plan-only`` stops after its outline.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agent.cli.checks import output_dir
from agent.cli.derive_cmd import derived_on
from agent.cli.errors import CLIError
from agent.cli.next_step import print_if_done
from agent.cli.options import add_model_options, choose_model, open_client
from agent.cli.progress import ProgressDisplay
from agent.cli.review_cmd import (
    add_drafts_options,
    add_review_option,
    drafts_setting,
    lint_avoid_setting,
    review_lines,
    review_of,
)
from agent.cli.rundir import discard_if_unused, open_run, store_errors
from agent.errors import InputError
from agent.store.paths import outside_run


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "sequel",
        help="a new book that starts from a finished book's final state",
        description="Write book two as a new NstAgent run: its initial state is book one's final "
        "state (characters and facts carried, open requirements kept unless --resolve), its "
        "search covers book one (opened read-only), its export names the series. Book one is "
        "a completed nst run or an imported book with a derived state.",
    )
    parser.add_argument("run_dir", metavar="RUN", help="book one (opened read-only)")
    parser.add_argument(
        "-o", "--out", required=True, metavar="RUN2", help="book two's run directory (must not hold one)"
    )
    parser.add_argument("--prompt", metavar="TEXT", help="what book two is about (default: book one's story goes on)")
    parser.add_argument(
        "--words",
        type=int,
        metavar="N",
        help="book two's length in words (default: as long as book one was planned, else as long as it is)",
    )
    parser.add_argument(
        "--resolve",
        action="append",
        default=[],
        metavar="KEY",
        help="an open requirement of book one that book two starts with resolved (repeatable)",
    )
    parser.add_argument(
        "--plan-only",
        action="store_true",
        help="stop once book two's outline is stored (fabula outline RUN2 [--edit], then fabula resume RUN2)",
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
        help="a sample of your own prose: book two is written in its "
        "voice (and measured against it); default: book one's sample, if it had one",
    )
    add_model_options(parser, stored="RUN")
    parser.set_defaults(handler=run)


def default_words(first) -> int:
    """Book two's length when none is given: book one's planned length, else its words (to the nearest 100)."""
    planned = first.info().config.get("words")
    if isinstance(planned, int) and planned > 0:
        return planned
    written = sum(c.words for c in first.chapters())
    return max(100, round(written / 100) * 100)


def run(args: argparse.Namespace) -> int:
    from agent import pipelines
    from agent.cli.voice_inputs import style_guide
    from agent.nst.sequel import plan_sequel, write_sequel
    from agent.settings import parse_assignments

    guide = style_guide(args.style) if args.style else None  # checked before anything is created
    with open_run(args.run_dir) as first:
        if args.words is None:
            args.words = default_words(first)
        try:
            sequel = plan_sequel(
                first,
                prompt=args.prompt,
                words=args.words,
                resolve=args.resolve,
                overrides=parse_assignments(args.overrides),
            )
        except InputError as exc:
            raise CLIError(str(exc)) from None
        with store_errors():
            outside_run(first.run_dir, args.out, what="book two")
        imported = pipelines.get(first.info().pipeline).takes == "manuscript"
        guide = guide or first.plans.get("style")
        stored = derived_on(first) if imported else pipelines.stored_model(first)
    review = review_of(args)
    drafts = {**drafts_setting(args), **lint_avoid_setting(args, sequel.config.get("profile"))}
    out = output_dir(Path(args.out))
    if (out / "run.db").exists():
        raise CLIError(f"{args.out} already holds a run; give --out a new folder")
    options, model = open_client(choose_model(args, stored=stored))
    existed = out.exists()
    try:
        print(
            f'fabula: writing book {sequel.series["index"]} of "{sequel.series["name"]}" ({args.words} words) '
            f"into {args.out} with {options.describe()}",
            file=sys.stderr,
        )
        try:
            with store_errors():
                store = write_sequel(
                    out,
                    sequel,
                    options,
                    model,
                    events=ProgressDisplay(quiet=args.quiet),
                    plan_only=args.plan_only,
                    review=review,
                    notes={**({"style": guide} if guide else {}), **drafts} or None,
                )
        except BaseException:
            discard_if_unused(out, existed)
            raise
    finally:
        model.close()
    with store:
        info = store.info()
        if args.plan_only:
            print(
                f"{args.out}: outline stored ({len(store.plans.get('outline') or [])} chapters), none written; "
                f"fabula outline {args.out} shows it, fabula resume {args.out} writes it"
            )
            return 0
        waiting = review_lines(store, args.out)
        if waiting:
            print("\n".join(waiting))
            return 0
        print(f"{args.out}: {info.status} at chapter {info.last_unit} of {info.target_units}")
        print_if_done(args.out, info.status)
        return 0 if info.status == "completed" else 1
