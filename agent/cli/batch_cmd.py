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
from typing import TYPE_CHECKING, Any

from agent import pipelines
from agent.cli.checks import output_dir
from agent.cli.common import loud
from agent.cli.errors import CLIError
from agent.cli.options import add_model_options, choose_model, open_client
from agent.cli.profile_choice import PROFILE_CHOICES, PROFILE_HELP, choose_profile
from agent.cli.progress import BatchDisplay, _duration
from agent.llm.options import LLMOptions
from agent.settings import parse_assignments

if TYPE_CHECKING:
    from agent.llm import LLM


def add_parser(sub) -> None:
    prompted, storied = pipelines.spoken(pipelines.names("prompt")), pipelines.spoken(pipelines.names("story"))
    parser = sub.add_parser(
        "batch",
        help="write many stories at once: a prompt set or a folder of Magnet stories",
        description="Write one run per story into DIR, K at a time against one server, with a "
        "batch database (DIR/batch.db) of every story's status and figures. 'fabula batch resume "
        "DIR' continues (failed stories are retried); 'fabula batch show DIR' reports.",
    )
    parser.add_argument("--pipeline", choices=pipelines.names(), help="the pipeline every story is written with")
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--prompts",
        metavar="FILE.jsonl",
        help=f"a prompt set (one JSON object a line with id and prompt), for {prompted}",
    )
    source.add_argument(
        "--stories", metavar="DIR", help=f"a folder of Magnet story definitions (*.toml), for {storied}"
    )
    parser.add_argument("--ids", metavar="SPEC", help="the prompts to write by id, e.g. 1-20,35 (default: all)")
    parser.add_argument(
        "--words", type=int, metavar="N", help="each story's target length in words (Magnet: overrides the definitions)"
    )
    parser.add_argument("-o", "--out", metavar="DIR", help="the batch folder (new or empty)")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=1,
        metavar="K",
        help="stories written at once against the server (default 1; the embedded model: 1)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        dest="overrides",
        help="any setting of the pipeline, for every story (VALUE is JSON, else a string)",
    )
    parser.add_argument("--profile", choices=PROFILE_CHOICES, help=PROFILE_HELP)
    parser.add_argument("--quiet", action="store_true", help="no live progress")
    add_model_options(parser)
    parser.set_defaults(handler=run_new)
    inner = parser.add_subparsers(dest="batch_command", metavar="{resume,show}")
    resume = inner.add_parser(
        "resume",
        help="continue a batch: interrupted stories from their last committed unit, failed and stopped ones retried",
    )
    resume.add_argument("batch_dir", metavar="DIR", help="the batch folder")
    resume.add_argument("--concurrency", type=int, metavar="K", help="stories at once (default: as before)")
    resume.add_argument("--force", action="store_true", help="resume stories whose configuration changed")
    add_model_options(resume, stored="the batch")
    resume.add_argument("--quiet", action="store_true", help="no live progress")
    resume.set_defaults(handler=run_resume)
    show = inner.add_parser("show", help="every story of a batch: status, words, calls, tokens, time, error")
    show.add_argument("batch_dir", metavar="DIR", help="the batch folder")
    show.add_argument("--json", action="store_true", help="one JSON object: the batch, its stories and totals")
    show.set_defaults(handler=run_show)


def run_new(args: argparse.Namespace) -> int:
    from agent.batch import create, plan_stories
    from agent.batch.runner import check_concurrency

    missing = [flag for flag, value in (("--pipeline", args.pipeline), ("--out", args.out)) if value is None]
    if missing:
        raise CLIError(
            f"fabula batch needs {' and '.join(missing)} (or: fabula batch resume DIR, fabula batch show DIR)"
        )
    if args.prompts is None and args.stories is None:
        raise CLIError(
            f"fabula batch needs --prompts FILE.jsonl ({', '.join(pipelines.names('prompt'))}) or "
            f"--stories DIR ({', '.join(pipelines.names('story'))})"
        )
    if args.ids is not None and args.prompts is None:
        raise CLIError("--ids only goes with --prompts")
    if args.words is not None:
        pipelines.get(args.pipeline).check_words(args.words)
    check_concurrency(args.concurrency)
    settings = parse_assignments(args.overrides)
    plan_stories(
        args.pipeline, prompts=args.prompts, ids=args.ids, stories=args.stories, words=args.words, settings=settings
    )  # every story checked before the model is opened
    output_dir(args.out)
    llm, model = open_client(choose_model(args, roles=pipelines.get(args.pipeline).model_roles))
    try:
        profile = choose_profile(args.profile, model)
        specs = plan_stories(
            args.pipeline,
            prompts=args.prompts,
            ids=args.ids,
            stories=args.stories,
            words=args.words,
            settings=settings,
            profile=profile.name,
        )
    except BaseException:
        model.close()
        raise
    if profile.reason and profile.name != "default":
        print(f"fabula: {profile.reason}", file=sys.stderr)
    print(
        f"fabula: batch of {len(specs)} {args.pipeline} stor{'y' if len(specs) == 1 else 'ies'} into {args.out}, "
        f"{args.concurrency} at a time, with {llm.describe()}"
        + (f", profile {profile.name}" if profile.name != "default" else ""),
        file=sys.stderr,
    )
    try:
        create(args.out, args.pipeline, specs, llm, concurrency=args.concurrency).close()
    except BaseException:
        model.close()
        raise
    return _write(args.out, llm, args.concurrency, quiet=args.quiet, model=model)


def run_resume(args: argparse.Namespace) -> int:
    from agent.batch import BatchStore
    from agent.batch.runner import check_concurrency, stored_batch_model

    if args.concurrency is not None:
        check_concurrency(args.concurrency)
    with BatchStore.open(args.batch_dir, readonly=True) as batch:
        info, rows = batch.info(), batch.stories()
    stored = info["llm"] if isinstance(info.get("llm"), dict) else {}
    chosen = choose_model(args, stored=stored_batch_model(stored, info["pipeline"]))
    left = sum(1 for r in rows if r.status != "completed")
    if not left:
        print(f"{args.batch_dir}: every story is completed ({len(rows)}); nothing to do")
        return 0
    llm, model = open_client(chosen)
    print(
        f"fabula: resuming batch {args.batch_dir}: {left} of {len(rows)} stories left, "
        f"{args.concurrency or info['concurrency']} at a time, with {llm.describe()}",
        file=sys.stderr,
    )
    return _write(args.batch_dir, chosen, args.concurrency, quiet=args.quiet, force=args.force, model=model)


def _write(
    folder: str, llm: LLMOptions, concurrency: int | None, *, quiet: bool, force: bool = False, model: LLM | None = None
) -> int:
    """Write the batch. ``model``: the client the command opened to check the server; the
    embedded model is kept and shared by every story (loaded once), a server's client is closed
    (each story opens its own, with its own routing key)."""
    from agent.batch import run

    if model is not None and llm.backend == "endpoint":
        model.close()
        model = None
    try:
        result = run(folder, llm=llm, concurrency=concurrency, sink=BatchDisplay(quiet=quiet), force=force, model=model)
    except KeyboardInterrupt:
        print(f"fabula: batch stopped; every story is resumable: fabula batch resume {folder}", file=loud())
        raise
    finally:
        if model is not None:
            model.close()
    s = result.snapshot
    rate = f", {s.completion_tokens / result.wall_s:.1f} completion tokens/s" if result.wall_s > 0 else ""
    print(
        f"{folder}: {result.count('completed')} of {len(result.stories)} stories completed, "
        f"{result.count('failed')} failed; {s.words_this_session} words, {s.calls} calls and "
        f"{s.completion_tokens} completion tokens in {_duration(result.wall_s)}{rate} "
        f"({result.concurrency} at a time)"
    )
    if result.stopped_early:
        print(result.stopped_early)
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
        print(
            json.dumps(
                {"batch": {"folder": args.batch_dir, **info}, "stories": stories, "totals": totals}, ensure_ascii=False
            )
        )
        return 0
    llm = info["llm"]
    print(
        f"batch     {args.batch_dir}: {info['pipeline']}, {totals['stories']} stories, backend {llm['backend']}"
        f"{', model ' + llm['model'] if llm.get('model') else ''}, {info['concurrency']} at a time"
    )
    print(
        "stories   "
        + ", ".join(
            f"{totals[k]} {k}"
            for k in ("completed", "running", "interrupted", "failed", "stopped", "pending")
            if totals[k]
        )
    )
    print(
        f"words     {totals['words']} of {totals['target_words']}; calls {totals['calls']}, prompt tokens "
        f"{totals['prompt_tokens']} ({_share(totals['cached_prompt_tokens'], totals['prompt_tokens'])} cached), "
        f"completion tokens {totals['completion_tokens']}"
    )
    print(f"{'story':16} {'status':12} {'words':>13} {'units':>7} {'calls':>6} {'tokens':>9} {'time':>8}  error")
    for s in stories:
        print(
            f"{s['key'][:16]:16} {s['status']:12} {s['words']:>6}/{s['target_words']:<6} "
            f"{_units(s):>7} {s['calls']:>6} {s['completion_tokens']:>9} {_took(s):>8}  {s['error'] or ''}"
        )
    return 0


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "0%"


def _units(s: dict[str, Any]) -> str:
    return f"{s['units']}/{s['target_units']}" if s["target_units"] else str(s["units"])


def _took(s: dict[str, Any]) -> str:
    if s["started_at"] is None:
        return "-"
    return _duration((s["ended_at"] or time.time()) - s["started_at"])
