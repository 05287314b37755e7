#!/usr/bin/env python3
"""The demo story's time (#35), this checkout against another revision, side by side.

Runs ``scripts/demo``'s story command (``fabula write magnet
agent/magnet/examples/thriller_museum.toml --words 200 --profile small``) on the embedded model,
``--rounds`` times, alternating with the same command on ``--against REV`` (a clone of this
repository at that revision, run by the same Python), so drift on a noisy machine hits both
alike. Prints each run's wall time, calls and failed calls, the median time per side, their
ratio, and this checkout's time split (``fabula show RUN --timing``) of its last run.
``--story nst`` runs the demo's NstAgent next step at 600 words instead (#35 item 3).

    .venv/bin/python scripts/bench_demo.py [--story demo|nst] [--rounds 2] [--against 960617c] [--keep DIR]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORIES = {
    "demo": ["write", "magnet", "agent/magnet/examples/thriller_museum.toml", "--words", "200", "--profile", "small"],
    "nst": [
        *("write", "nst", "--prompt", "A lighthouse keeper finds a bell that rings by itself."),
        *("--words", "600", "--profile", "small"),
    ],
}


def checkout(revision: str, folder: Path) -> Path:
    """A clone of this repository at ``revision`` (its own files; this environment's packages)."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(folder)], check=True)
    subprocess.run(["git", "-C", str(folder), "checkout", "-q", revision], check=True)
    return folder


def write(tree: Path, story: list[str], out: Path) -> float:
    """One story written by the code in ``tree``; its wall time in seconds."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "agent.cli", *story, "--out", str(out)], cwd=tree, capture_output=True, text=True
    )
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"bench_demo: {tree} failed ({done.returncode}): {done.stderr.strip()[-300:]}")
    return took


def calls(out: Path) -> tuple[int, int]:
    """The run's model calls and how many of them failed (cut off, ran away or invalid)."""
    with sqlite3.connect(out / "run.db") as db:
        total, failed = db.execute("SELECT COUNT(*), COUNT(error) FROM llm_calls").fetchone()
    return int(total), int(failed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--story", choices=sorted(STORIES), default="demo")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--against", metavar="REV", help="a revision to run side by side (e.g. 960617c)")
    parser.add_argument("--keep", metavar="DIR", help="keep the runs in DIR (default: a temporary folder)")
    args = parser.parse_args()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-demo-"))
    base.mkdir(parents=True, exist_ok=True)
    trees = {"this": ROOT}
    if args.against:
        trees = {args.against: checkout(args.against, base / "against"), **trees}
    times: dict[str, list[float]] = {side: [] for side in trees}
    for number in range(1, args.rounds + 1):
        for side, tree in trees.items():
            out = base / f"{side}-{number}"
            took = write(tree, STORIES[args.story], out)
            times[side].append(took)
            total, failed = calls(out)
            print(f"{side} round {number}: {took:.1f} s, {total} calls, {failed} failed", flush=True)
    medians = {side: statistics.median(found) for side, found in times.items()}
    for side, median in medians.items():
        print(f"{side}: median {median:.1f} s over {args.rounds}")
    if args.against:
        print(f"this / {args.against}: {medians['this'] / medians[args.against]:.2f}")
    shown = subprocess.run(
        [sys.executable, "-m", "agent.cli", "show", str(base / f"this-{args.rounds}"), "--timing"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    print(shown.stdout[shown.stdout.find("timing") :].rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
