"""``fabula watch RUN_DIR``: print a run's chapters (or Magnet paragraphs) as they commit."""

from __future__ import annotations

import argparse
import sys

from agent.cli.checks import finite
from agent.cli.errors import CLIError
from agent.cli.rundir import store_errors
from agent.store.readonly import open_readonly
from agent.store.reports.follow import follow


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "watch",
        help="follow a run in the terminal, printing each unit as it commits",
        description="Print what a run has written so far, then each new chapter or Magnet "
        "paragraph as it is committed; returns when the run stops running (or on Ctrl-C). "
        "Read-only.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run directory")
    parser.add_argument(
        "--from",
        dest="start",
        type=int,
        default=1,
        metavar="N",
        help="start at chapter/step N (default 1: everything so far)",
    )
    parser.add_argument(
        "--interval",
        "--poll",
        dest="interval",
        type=finite(0.0, 3600.0, low_open=True),
        default=1.0,
        metavar="SECONDS",
        help="how often to look for new units (default 1)",
    )
    parser.add_argument(
        "--wait", action="store_true", help="keep waiting after the run stops (e.g. for a later `fabula resume`)"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.start < 1:
        raise CLIError("--from must be 1 or more")
    if args.interval <= 0:
        raise CLIError("--interval must be positive")
    with store_errors():
        store = open_readonly(args.run_dir)
    try:
        unit_word = "chapter" if store.info().unit_kind == "chapter" else "step"
        print(
            f"watching {store.run_dir} ({store.info().pipeline}; Ctrl-C stops watching, not the run)", file=sys.stderr
        )
        for unit in follow(store, after=args.start - 1, interval=args.interval, keep_waiting=args.wait):
            if unit.heading:
                print(
                    f"\n## {unit.heading}"
                    + ("  [degraded: " + (unit.degraded_reason or "no reason") + "]" if unit.degraded else "")
                    + "\n"
                )
            for kind, text in unit.paragraphs:
                print((f"[{unit_word} {unit.unit}, {kind}] " if kind not in ("chapter", "narration") else "") + text)
                print()
            sys.stdout.flush()
        info = store.info()
        print(
            f"{store.run_dir.name}: {store.live_status()} at {unit_word} {info.last_unit}"
            + (f" of {info.target_units}" if info.target_units is not None else ""),
            file=sys.stderr,
        )
    finally:
        store.close()
    return 0
