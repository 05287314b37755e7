"""``fabula batch``: many stories at once; ``fabula batch resume DIR``; ``fabula batch show DIR``.

A new batch is checked whole before anything is created (the prompt set and ``--ids``, the
story definitions, every setting, the server), then written K stories at a time
(``agent.batch.runner``). Each story is an ordinary run in ``DIR/<story>``; ``DIR/batch.db``
says how each one went. Exit 0 when every story completed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from agent.cli.checks import output_dir
from agent.cli.errors import CLIError
from agent.cli.options import add_model_options, call_timeout, check_server, model_options
from agent.cli.progress import BatchDisplay, _duration
from agent.llm.options import LLMOptions, resolve
from agent.settings import parse_assignments

PIPELINES = ("nst", "rollsum", "direct", "magnet", "single")


def add_parser(sub) -> None:
    parser = sub.add_parser("batch", help="write many stories at once: a prompt set or a folder of Magnet stories",
                            description="Write one run per story into DIR, K at a time against one server, with a "
                            "batch database (DIR/batch.db) of every story's status and figures. 'fabula batch resume "
                            "DIR' continues (failed stories are retried); 'fabula batch show DIR' reports.")
    parser.add_argument("--pipeline", choices=PIPELINES, help="the pipeline every story is written with")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--prompts", metavar="FILE.jsonl", help="a prompt set (one JSON object a line with id and "
                        "prompt), for nst, rollsum and direct")
    source.add_argument("--stories", metavar="DIR", help="a folder of Magnet story definitions (*.toml), for magnet "
                        "and single")
    parser.add_argument("--ids", metavar="SPEC", help="the prompts to write by id, e.g. 1-20,35 (default: all)")
    parser.add_argument("--words", type=int, metavar="N", help="each story's target length in words (Magnet: "
                        "overrides the definitions)")
    parser.add_argument("--out", metavar="DIR", help="the batch folder (new or empty)")
    parser.add_argument("--concurrency", type=int, default=1, metavar="K",
                        help="stories written at once against the server (default 1; the embedded model: 1)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="any setting of the pipeline, for every story (VALUE is JSON, else a string)")
    parser.add_argument("--profile", choices=["default", "small"], default="default",
                        help="small: the aids that keep 135M-4B models writing; default: as the papers")
    parser.add_argument("--quiet", action="store_true", help="no live progress")
    add_model_options(parser)
    parser.set_defaults(handler=run_new)
    inner = parser.add_subparsers(dest="batch_command", metavar="{resume,show}")
    resume = inner.add_parser("resume", help="continue a batch: interrupted stories from their last committed unit, "
                              "failed and stopped ones retried")
    resume.add_argument("batch_dir", metavar="DIR")
    resume.add_argument("--concurrency", type=int, metavar="K", help="stories at once (default: as before)")
    resume.add_argument("--force", action="store_true", help="resume stories whose configuration changed")
    resume.add_argument("--endpoint", metavar="URL", help="server base URL (default: FABULA_ENDPOINT, else as stored)")
    resume.add_argument("--api-key", metavar="KEY", help="bearer token for the server (env FABULA_API_KEY)")
    resume.add_argument("--call-timeout", metavar="S", type=call_timeout,
                        help="total seconds one model call may take (env FABULA_CALL_TIMEOUT)")
    resume.add_argument("--quiet", action="store_true", help="no live progress")
    resume.set_defaults(handler=run_resume)
    show = inner.add_parser("show", help="every story of a batch: status, words, calls, tokens, time, error")
    show.add_argument("batch_dir", metavar="DIR")
    show.add_argument("--json", action="store_true", help="one JSON object: the batch, its stories and totals")
    show.set_defaults(handler=run_show)


def run_new(args: argparse.Namespace) -> int:
    from agent.batch import create, plan_stories
    from agent.batch.runner import check_concurrency
    from agent.nst.config import MAX_WORDS, MIN_WORDS

    missing = [flag for flag, value in (("--pipeline", args.pipeline), ("--out", args.out)) if value is None]
    if missing:
        raise CLIError(f"fabula batch needs {' and '.join(missing)} (or: fabula batch resume DIR, fabula batch show "
                       "DIR)")
    if args.prompts is None and args.stories is None:
        raise CLIError("fabula batch needs --prompts FILE.jsonl (nst, rollsum, direct) or --stories DIR (magnet, "
                       "single)")
    if args.ids is not None and args.prompts is None:
        raise CLIError("--ids only goes with --prompts")
    if args.words is not None and args.pipeline in ("nst", "rollsum", "direct") \
            and not MIN_WORDS <= args.words <= MAX_WORDS:
        raise CLIError(f"--words must be between {MIN_WORDS} and {MAX_WORDS}, got {args.words}")
    check_concurrency(args.concurrency)
    specs = plan_stories(args.pipeline, prompts=args.prompts, ids=args.ids, stories=args.stories, words=args.words,
                         settings=parse_assignments(args.overrides), profile=args.profile)
    output_dir(args.out)
    llm = check_server(model_options(args))
    print(f"fabula: batch of {len(specs)} {args.pipeline} stor{'y' if len(specs) == 1 else 'ies'} into {args.out}, "
          f"{args.concurrency} at a time, with {llm.describe()}"
          + (f", profile {args.profile}" if args.profile != "default" else ""), file=sys.stderr)
    create(args.out, args.pipeline, specs, llm, concurrency=args.concurrency).close()
    return _write(args.out, llm, args.concurrency, quiet=args.quiet)


def run_resume(args: argparse.Namespace) -> int:
    import os

    from agent.batch import BatchStore
    from agent.batch.runner import check_concurrency, effective_llm

    if args.call_timeout is not None:
        os.environ["FABULA_CALL_TIMEOUT"] = str(args.call_timeout)
    if args.concurrency is not None:
        check_concurrency(args.concurrency)
    given = resolve(backend="endpoint", endpoint=args.endpoint, api_key=args.api_key)
    with BatchStore.open(args.batch_dir, readonly=True) as batch:
        info, rows = batch.info(), batch.stories()
    llm = effective_llm(info["llm"], given)
    left = sum(1 for r in rows if r.status != "completed")
    if not left:
        print(f"{args.batch_dir}: every story is completed ({len(rows)}); nothing to do")
        return 0
    llm = check_server(llm)
    print(f"fabula: resuming batch {args.batch_dir}: {left} of {len(rows)} stories left, "
          f"{args.concurrency or info['concurrency']} at a time, with {llm.describe()}", file=sys.stderr)
    return _write(args.batch_dir, llm, args.concurrency, quiet=args.quiet, force=args.force)


def _write(folder: str, llm: LLMOptions, concurrency: int | None, *, quiet: bool, force: bool = False) -> int:
    from agent.batch import run

    try:
        result = run(folder, llm=llm, concurrency=concurrency, sink=BatchDisplay(quiet=quiet), force=force)
    except KeyboardInterrupt:
        print(f"fabula: batch stopped; every story is resumable: fabula batch resume {folder}", file=sys.stderr)
        raise
    s = result.snapshot
    rate = f", {s.completion_tokens / result.wall_s:.1f} completion tokens/s" if result.wall_s > 0 else ""
    print(f"{folder}: {result.count('completed')} of {len(result.stories)} stories completed, "
          f"{result.count('failed')} failed; {s.words_this_session} words, {s.calls} calls and "
          f"{s.completion_tokens} completion tokens in {_duration(result.wall_s)}{rate} "
          f"({result.concurrency} at a time)")
    for row in result.stories:
        if row.status == "failed":
            print(f"  {row.key} failed: {row.error}")
    if not result.complete:
        print(f"fabula batch resume {folder} retries the stories not completed; fabula batch show {folder}")
    return 0 if result.complete else 1


def run_show(args: argparse.Namespace) -> int:
    from agent.batch import BatchStore

    with BatchStore.open(args.batch_dir, readonly=True) as batch:
        info, rows = batch.info(), batch.stories()
    stories = [r.summary() for r in rows]
    totals = {"stories": len(rows)}
    for status in ("completed", "running", "interrupted", "failed", "stopped", "pending"):
        totals[status] = sum(1 for s in stories if s["status"] == status)
    for key in ("words", "target_words", "calls", "prompt_tokens", "cached_prompt_tokens", "completion_tokens"):
        totals[key] = sum(s[key] for s in stories)
    if args.json:
        print(json.dumps({"batch": {"folder": args.batch_dir, **info}, "stories": stories, "totals": totals},
                         ensure_ascii=False))
        return 0
    llm = info["llm"]
    print(f"batch     {args.batch_dir}: {info['pipeline']}, {totals['stories']} stories, backend {llm['backend']}"
          f"{', model ' + llm['model'] if llm.get('model') else ''}, {info['concurrency']} at a time")
    print("stories   " + ", ".join(f"{totals[k]} {k}" for k in ("completed", "running", "interrupted", "failed",
                                                                  "stopped", "pending") if totals[k]))
    print(f"words     {totals['words']} of {totals['target_words']}; calls {totals['calls']}, prompt tokens "
          f"{totals['prompt_tokens']} ({_share(totals['cached_prompt_tokens'], totals['prompt_tokens'])} cached), "
          f"completion tokens {totals['completion_tokens']}")
    print(f"{'story':16} {'status':12} {'words':>13} {'units':>7} {'calls':>6} {'tokens':>9} {'time':>8}  error")
    for s in stories:
        print(f"{s['key'][:16]:16} {s['status']:12} {s['words']:>6}/{s['target_words']:<6} "
              f"{_units(s):>7} {s['calls']:>6} {s['completion_tokens']:>9} {_took(s):>8}  {s['error'] or ''}")
    return 0


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "0%"


def _units(s: dict[str, Any]) -> str:
    return f"{s['units']}/{s['target_units']}" if s["target_units"] else str(s["units"])


def _took(s: dict[str, Any]) -> str:
    if s["started_at"] is None:
        return "-"
    return _duration((s["ended_at"] or time.time()) - s["started_at"])
