"""``fabula lint RUN --fix``: lint, rewrite each flagged chapter's passages (``agent.nst.revise.lint_fix``), lint again.

The report is each fixed chapter's score before and after and its new version (the old one is kept).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agent.cli.errors import CLIError
from agent.cli.options import choose_model, open_client
from agent.cli.rundir import open_run, store_errors
from agent.errors import InputError
from agent.lint import LintRules, lint_book


def fix(args: argparse.Namespace, rules: LintRules) -> int:
    from agent import pipelines
    from agent.nst.revise.lint_fix import fix_chapter
    from agent.nst.revise.rewrite import check_revisable

    if not (Path(args.target) / "run.db").exists():
        raise CLIError(f"--fix rewrites a run's chapters; {args.target} is not a run (lint it without --fix)")
    with open_run(args.target, readonly=False) as store:
        if store.live_status() == "running":
            raise CLIError(f"{args.target} is being written; fix it once it stops", exit_code=1)
        chapters = store.chapters()
        before = lint_book([(c.title, c.text) for c in chapters], rules)
        todo = [c.index for c in before.chapters if c.flags and (args.chapter is None or c.index == args.chapter)]
        if args.chapter is not None and not 1 <= args.chapter <= len(chapters):
            raise CLIError(f"--chapter must be between 1 and {len(chapters)}, got {args.chapter}")
        try:
            for index in todo[:1]:
                check_revisable(store, index)
        except InputError as exc:
            raise CLIError(str(exc)) from None
        if not todo:
            print(f"nothing flagged; nothing changed (book score {before.score})")
            return 0
        options, model = open_client(choose_model(args, stored=pipelines.stored_model(store)))
        done = []
        try:
            for index in todo:
                print(
                    f"fabula: fixing {len(before.chapters[index - 1].flags)} flag(s) of chapter {index} with "
                    f"{options.describe()}",
                    file=sys.stderr,
                )
                with store_errors(), pipelines.on_unit(store, index, "lint-fix", llm=options, model=model) as ctx:
                    done.append((index, fix_chapter(ctx, index, rules)))
        finally:
            model.close()
        after = lint_book([(c.title, c.text) for c in store.chapters()], rules)
        last = store.info().last_unit
    for index, fixed in done:
        b, a = before.chapters[index - 1], after.chapters[index - 1]
        if fixed is None:
            print(f"chapter {index}: score {b.score}, unchanged (no passage came back rewritten)")
            continue
        print(
            f"chapter {index}: score {b.score} -> {a.score} ({len(b.flags)} -> {len(a.flags)} flags); "
            f"{fixed.passages} passage(s) rewritten as version {fixed.version}, version {fixed.version - 1} kept; "
            f"{fixed.rederived.what}"
        )
    print(f"book: score {before.score} -> {after.score} per 1,000 words")
    first = min(i for i, f in done if f is not None) if any(f for _, f in done) else None
    if first is not None and first < last:
        print(
            f"chapters after {first} were written before the fix and are marked stale; fabula reconcile "
            f"{args.target} re-derives their states",
            file=sys.stderr,
        )
    return 0
