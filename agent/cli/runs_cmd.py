"""``fabula runs [DIR]``: the runs under a folder, one line each."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agent.cli.errors import CLIError
from agent.store import RunStore, StoreError
from agent.store.lineage.fork import STALE_KEY
from agent.store.paths import DB_NAME
from agent.store.reports.batches import is_batch, read_batch, summary_line
from agent.store.reports.stats import summarize


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "runs",
        help="list the runs in a folder (pipeline, status, words, chapters)",
        description="List every run directory directly inside DIR (and DIR itself if it is one), "
        "and every batch folder there as a batch: its stories done/running/failed/pending, "
        "words of its target, tokens, and each story's run.",
    )
    parser.add_argument("dir", nargs="?", default=".", help="folder holding run directories (default: .)")
    parser.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per run, with the keys of "
        "`fabula show --json` (run_dir, pipeline, status, units_done, target_units, words, ...); "
        'a batch is one object with kind "batch", batch_dir, counts, words, target_words, tokens, '
        "stories",
    )
    parser.set_defaults(handler=run)


def find_runs(folder: Path) -> list[Path]:
    candidates = [folder, *sorted(p for p in folder.iterdir() if p.is_dir())]
    return [p for p in candidates if (p / DB_NAME).is_file()]


def find_batches(folder: Path) -> list[Path]:
    candidates = [folder, *sorted(p for p in folder.iterdir() if p.is_dir())]
    return [p for p in candidates if is_batch(p)]


def print_batches(args: argparse.Namespace, folder: Path) -> int:
    """Each batch in (or at) ``folder``: a summary line and a line per story; returns how many."""
    batches = find_batches(folder)
    for path in batches:
        name = str(path.relative_to(folder)) if path != folder else "."
        where = str(Path(args.dir) / name) if name != "." else args.dir
        summary = read_batch(path)
        if args.json:
            print(json.dumps({"kind": "batch", "batch_dir": where, **summary.as_dict()}, ensure_ascii=False))
            continue
        print(f"batch {where}  {summary.pipeline}  {summary_line(summary)}")
        for story in summary.stories:
            progress = f"{story.units}/{story.target_units}" if story.target_units else str(story.units)
            error = f"  {story.error}" if story.error else ""
            words = f"{story.words}/{story.target_words}"
            print(f"  {Path(where) / story.run_dir}  {story.status:11} {progress:>7} {words:>13} words{error}")
    return len(batches)


def status_in_words(store: RunStore, status: str) -> str:
    """The status as a writer reads it: a run with an outline and no chapter yet is "planned"; a run whose
    later chapters were written before a hand edit says how many are stale."""
    info = store.info()
    if status == "stopped" and info.last_unit == 0 and isinstance(store.plans.get("outline"), list):
        return "planned"
    stale = store.plans.get(STALE_KEY)
    later = info.last_unit - stale["unit"] if isinstance(stale, dict) and isinstance(stale.get("unit"), int) else 0
    return f"{status}, {later} stale" if later > 0 else status


def run(args: argparse.Namespace) -> int:
    folder = Path(args.dir).expanduser()
    if not folder.is_dir():
        raise CLIError(f"no such folder: {args.dir}")
    batches = print_batches(args, folder.resolve())
    rows, names = [], []
    shown_status: dict[str, str] = {}  # the table's status in words (the JSON keeps show --json's keys)
    for path in find_runs(folder.resolve()):
        name = str(path.relative_to(folder.resolve())) if path != folder.resolve() else "."
        where = str(Path(args.dir) / name) if name != "." else args.dir
        names.append(name)
        try:
            with RunStore.open(path, readonly=True) as store:
                s = summarize(store)
                shown = status_in_words(store, s.status)
            rows.append({"run_dir": where, **s.as_dict()})
            shown_status[where] = shown
        except (StoreError, OSError) as exc:
            rows.append({"run_dir": where, "error": str(exc)})
        except Exception as exc:  # sqlite3.DatabaseError and friends: one bad run must not hide the rest
            rows.append({"run_dir": where, "error": f"unreadable: {exc}"})
    if args.json:
        for row in rows:
            print(json.dumps(row, ensure_ascii=False))
        return 0
    if not rows:
        if not batches:
            print(f"no runs in {args.dir}")
        return 0
    width = max(len(n) for n in names)
    print(f"{'RUN':{width}}  {'PIPELINE':10} {'STATUS':20} {'PROGRESS':>11} {'WORDS':>8}  DEGRADED")
    for name, r in zip(names, rows, strict=True):
        if "pipeline" not in r:
            print(f"{name:{width}}  error: {r['error']}")
            continue
        done = f"{r['units_done']}/{r['target_units']}" if r["target_units"] is not None else str(r["units_done"])
        progress = f"{done} {'ch' if r['unit_kind'] == 'chapter' else 'st'}"
        print(
            f"{name:{width}}  {r['pipeline']:10} {shown_status[r['run_dir']]:20} {progress:>11} {r['words']:>8}  "
            f"{len(r['degraded']) or '-'}"
        )
    for r in rows:
        if r.get("status") == "review":
            print(
                f"{r['run_dir']} waits in review: fabula show {r['run_dir']} says where; "
                f"fabula approve {r['run_dir']} writes on"
            )
    return 0
