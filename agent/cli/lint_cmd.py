"""``fabula lint RUN|FILE``: read a book for the habits of machine prose, without a model.

A run is read as the book its export would be (chapters, or a Magnet run's timesteps); a file is read the
way ``fabula import`` reads it (text, Markdown, EPUB, DOCX). The report: per chapter a score (flags per
1,000 words) and each flagged passage with its rule, then the book's totals; ``--json`` gives the same as
one JSON object. ``--fix`` (a run only) revises the flagged passages; see ``agent.cli.lint_fix``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agent.cli.errors import CLIError
from agent.lint import BookReport, LintRules, lint_book, load_rules


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "lint",
        help="flag stock phrases, repeats and tics of machine prose (no model)",
        description="Lint a run's chapters, or a manuscript file (text, Markdown, EPUB, "
        "DOCX), for the habits of machine prose: stock phrases (a rule list kept as data), "
        "phrases repeated across chapters, monotonous sentence openings, dialogue-tag "
        "habits; overused words are listed. Each chapter's score is its flags per 1,000 "
        "words (0: clean).",
    )
    parser.add_argument("target", metavar="RUN|FILE", help="a run directory or a manuscript file")
    parser.add_argument(
        "--rules",
        metavar="FILE",
        type=Path,
        help="your own rules (TOML, the shape of the defaults): add, replace or turn off rules",
    )
    parser.add_argument("--chapter", type=int, metavar="N", help="report this chapter only")
    parser.add_argument("--json", action="store_true", help="the report as one JSON object")
    parser.add_argument(
        "--show",
        type=int,
        default=5,
        metavar="K",
        help="flagged passages printed per chapter (default 5; --json has them all)",
    )
    parser.add_argument("--list-rules", action="store_true", help="print the rules (name, example) and exit")
    parser.add_argument(
        "--fix",
        action="store_true",
        help="a run: revise each flagged chapter's passages with the run's model (a new "
        "version; the old one is kept), then lint again",
    )
    from agent.cli.options import add_model_options

    add_model_options(parser, stored="RUN")
    parser.set_defaults(handler=run)


def chapters_of(target: str) -> list[tuple[str, str]]:
    """``(heading, text)`` per chapter of a run directory or a manuscript file."""
    path = Path(target)
    if (path / "run.db").exists():
        from agent.cli.rundir import open_run
        from agent.store.export.book import read_book

        with open_run(target) as store:
            book = read_book(store, by_step=True)
        return [(s.heading, s.text) for s in book.sections]
    if path.is_dir():
        raise CLIError(f"{target} is a folder but not a run (no run.db)")
    if not path.exists():
        raise CLIError(f"{target}: no such run or file")
    from agent.manuscript import read_manuscript

    return [(p.title, p.text) for p in read_manuscript(path).pieces]


def lint_target(target: str, rules: LintRules) -> BookReport:
    texts = chapters_of(target)
    if not texts:
        raise CLIError(f"{target} has no chapters to lint")
    return lint_book(texts, rules)


def print_report(report: BookReport, *, chapter: int | None, show: int, out=None) -> None:
    out = out or sys.stdout
    for c in report.chapters:
        if chapter is not None and c.index != chapter:
            continue
        families = ", ".join(f"{k} {v}" for k, v in c.by_family().items() if v)
        print(
            f"chapter {c.index} ({c.title}): {c.words} words, {len(c.flags)} flags, score {c.score}"
            + (f" ({families})" if families else ""),
            file=out,
        )
        for f in c.flags[:show]:
            print(f"  [{f.rule}] {f.detail}: {f.passage}", file=out)
        if len(c.flags) > show:
            print(f"  ... {len(c.flags) - show} more (--show K, or --json)", file=out)
        if c.overused:
            print("  overused: " + ", ".join(f"{w} x{n} ({r:g}x)" for _, w, n, r in c.overused[:5]), file=out)
    rules = ", ".join(f"{rule} {n}" for rule, n in report.by_rule()[:8])
    print(
        f"book: {report.words} words, {len(report.flags)} flags, score {report.score} per 1,000 words"
        + (f"; most flagged: {rules}" if rules else ""),
        file=out,
    )


def run(args: argparse.Namespace) -> int:
    rules = load_rules(args.rules)
    if args.list_rules:
        for rule in rules.rules:
            print(f"{rule.name}: {rule.example}")
        return 0
    if args.show < 0:
        raise CLIError(f"--show must be at least 0, got {args.show}")
    if args.fix:
        from agent.cli.lint_fix import fix

        return fix(args, rules)
    report = lint_target(args.target, rules)
    if args.chapter is not None and not 1 <= args.chapter <= len(report.chapters):
        raise CLIError(f"--chapter must be between 1 and {len(report.chapters)}, got {args.chapter}")
    if args.json:
        data = report.to_dict()
        if args.chapter is not None:
            data["chapters"] = [c for c in data["chapters"] if c["index"] == args.chapter]
        print(json.dumps(data, ensure_ascii=False))
    else:
        print_report(report, chapter=args.chapter, show=args.show)
    return 0
