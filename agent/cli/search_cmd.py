"""``fabula search RUN_DIR QUERY``: the writer's chapter search, from the shell."""

from __future__ import annotations

import argparse
import json
import sys

from agent.cli.errors import CLIError
from agent.cli.rundir import open_run
from agent.store.search import MAX_TERMS, dropped_terms, highlights

MAX_K = 1000
MAX_CHAPTER = 1_000_000


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "search",
        help="BM25 search over a run's chapters (the writer's search tool)",
        description="Rank sentence windows of the run's chapters by BM25; the query is "
        'split into terms and matched as an OR of them; a "quoted phrase" must appear as '
        "written; no sentence is shown twice; on a terminal the query's words are in bold.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run directory")
    parser.add_argument(
        "query",
        metavar="QUERY",
        help="words to look for (any of them); a phrase in double "
        "quotes ('\"universally acknowledged\"') must appear as written",
    )
    parser.add_argument("-k", type=int, default=8, help="how many windows to return (default: 8)")
    parser.add_argument(
        "--before", type=int, metavar="N", help="only chapters before N (what the writer of chapter N sees)"
    )
    parser.add_argument("--json", action="store_true", help="JSON lines: chapter, position, score, text")
    parser.set_defaults(handler=run)


def _marked(text: str, query: str, bold: bool) -> str:
    """The query's words in bold on a terminal (as they are elsewhere)."""
    if not bold:
        return text
    out, pos = [], 0
    for start, end in highlights(text, query):
        out += [text[pos:start], "\033[1m", text[start:end], "\033[0m"]
        pos = end
    return "".join(out) + text[pos:]


def run(args: argparse.Namespace) -> int:
    if args.k < 1:
        raise CLIError("-k must be at least 1")
    if args.k > MAX_K:
        raise CLIError(f"-k must be at most {MAX_K}, got {args.k}")
    if args.before is not None and not 1 <= args.before <= MAX_CHAPTER:
        raise CLIError(f"--before must be between 1 and {MAX_CHAPTER}, got {args.before}")
    if dropped_terms(args.query):
        print(
            f"fabula: note: the query has more than {MAX_TERMS} distinct terms; only the first {MAX_TERMS} "
            "are searched",
            file=sys.stderr,
        )
    with open_run(args.run_dir) as store:
        if store.info().unit_kind != "chapter":
            raise CLIError(f"{args.run_dir} is a {store.info().pipeline} run; it has no chapters to search")
        hits = store.reader_search(args.query, k=args.k, before=args.before)
    for hit in hits:
        if args.json:
            print(json.dumps(hit.as_dict(), ensure_ascii=False))
        else:
            print(f"[chapter {hit.chapter}, sentence {hit.position + 1}, score {hit.score:.3f}]")
            print(f"  {_marked(' '.join(hit.text.split()), args.query, sys.stdout.isatty())}")
    if not hits and not args.json:
        print("no matches")
    return 0
