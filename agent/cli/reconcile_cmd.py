"""``fabula reconcile RUN [--from K] [--lock K..M]``: after ``fabula edit RUN --chapter K``, the state
of K and of every later written chapter is re-derived from their texts in order, the later chapters
whose text now contradicts the new state are listed with quotes, and the outline entries of the
chapters not yet written are re-planned (``agent.nst.revise.reconcile``). Refusals are one line, exit 2,
nothing written; an interrupted reconcile continues with the same command.
"""

from __future__ import annotations

import argparse
import sys

from agent.cli.errors import CLIError
from agent.cli.options import add_model_options, choose_model, open_client
from agent.cli.rundir import open_run, store_errors
from agent.errors import InputError
from agent.store import StoreError


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "reconcile",
        help="after an edit: re-derive the later states, list the chapters that "
        "contradict them, re-plan the unwritten chapters",
        description="After fabula edit RUN --chapter K: re-derive the state of chapter K and of "
        "every later written chapter from their texts, in order; list the later chapters whose "
        "text now contradicts the state after K (a judge call each, quotes given); re-plan the "
        "outline of the chapters not yet written from the new state. No chapter's text is "
        "changed. Run it again to continue an interrupted reconcile.",
    )
    parser.add_argument("run_dir", metavar="RUN", help="an NstAgent run")
    parser.add_argument(
        "--from",
        dest="start",
        type=int,
        metavar="K",
        help="the edited chapter (default: the earliest edited since the last reconcile)",
    )
    parser.add_argument(
        "--lock",
        action="append",
        default=[],
        metavar="K..M",
        help="chapters the writer approved (K, or K..M; repeatable): never judged for a rewrite, "
        "never corrected by the writer model",
    )
    add_model_options(parser, stored="RUN")
    parser.set_defaults(handler=run)


def report(record: dict) -> list[str]:
    """The findings, one block per chapter, for stdout."""
    lines = [
        f"reconcile {record['id']} of chapter {record['from']}: states of chapters "
        f"{record['from']}-{record['last']} re-derived in order"
    ]
    flagged = []
    for key, judged in sorted(record.get("judged", {}).items(), key=lambda kv: int(kv[0])):
        if judged.get("locked"):
            lines.append(f"chapter {key}: locked (approved by the writer): kept as it is")
        elif judged.get("error"):
            lines.append(f"chapter {key}: not judged ({judged['error']})")
        elif judged["contradictions"]:
            flagged.append(int(key))
            lines.append(f"chapter {key}: contradicts the new state:")
            for c in judged["contradictions"]:
                where = "" if c.get("found") else " (quote not found in the chapter)"
                lines.append(f'  "{c["quote"]}"{where}')
                lines.append(f"    state: {c['state']}; {c['explanation']}")
        else:
            lines.append(f"chapter {key}: consistent with the new state")
    replanned = record.get("replanned") or []
    lines.append(
        f"re-planned: chapters {replanned[0]}-{replanned[-1]}"
        if replanned
        else "re-planned: none (every planned chapter is written)"
    )
    lines.append("to rewrite: " + (", ".join(f"chapter {i}" for i in flagged) if flagged else "none"))
    return lines


def run(args: argparse.Namespace) -> int:
    from agent import pipelines
    from agent.nst.revise.reconcile import prepare
    from agent.store.writer.locks import parse_range

    with open_run(args.run_dir, readonly=False) as store:
        if store.live_status() == "running":
            raise CLIError(f"{args.run_dir} is being written; reconcile it once it stops", exit_code=1)
        try:
            written = store.info().last_unit
            lock = sorted({i for text in args.lock for i in parse_range(text, written=written)})
            pending = prepare(store, start=args.start, lock=lock)
        except (InputError, StoreError) as exc:
            raise CLIError(str(exc)) from None
        return finish(store, args.run_dir, pending, choose_model(args, stored=pipelines.stored_model(store)))


def finish(store, run_dir: str, pending, llm) -> int:
    """Run (or continue) ``pending`` on the model ``llm`` names; the report on stdout (0), or why it
    stopped (1: the same command, or ``fabula resume``, continues it)."""
    from agent.nst.revise.reconcile import reconcile

    options, model = open_client(llm)
    record = pending.record
    print(
        f"fabula: {'continuing' if pending.resumed else 'starting'} reconcile {record['id']} of chapter "
        f"{record['from']} (chapters {record['from']}-{record['last']} written) with {options.describe()}",
        file=sys.stderr,
    )
    try:
        with store_errors():
            result = reconcile(store, pending, options, model, say=lambda line: print(line, file=sys.stderr))
    finally:
        model.close()
    if result.stopped:
        print(f"reconcile stopped: {result.stopped}; fabula reconcile {run_dir} continues it", file=sys.stderr)
        return 1
    print("\n".join(report(result.record)))
    return 0
