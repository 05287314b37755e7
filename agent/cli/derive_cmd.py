"""``fabula derive RUN``: the narrative state of an imported book, chapter by chapter, from its text.

One update call per chapter through NstAgent's own update path (``agent.nst.revise.derive``: evidence
checked against that chapter, every call in the run's ledger), one line per chapter on stderr
with the time so far and the ETA. Resumable: a killed derive continues at the first chapter
without a state; a chapter whose update failed is marked and ``derive`` again retries only
those. The model flags are every model command's; the default is the server the run was last
derived on.
"""

from __future__ import annotations

import argparse
import sys

from agent.cli.checks import bounded_int
from agent.cli.errors import CLIError
from agent.cli.options import add_model_options, choose_model, open_client
from agent.cli.rundir import open_run, store_errors
from agent.limits import TOKEN_CAP


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "derive",
        help="derive an imported book's narrative state from its chapters (resumable)",
        description="Build NstAgent's typed narrative state (characters, past events, open "
        "requirements) of a run made by fabula import, one update call per chapter, each "
        "entry's evidence checked against that chapter. Run it again to continue after a "
        "stop or to retry the chapters whose update failed.",
    )
    parser.add_argument("run_dir", metavar="RUN", help="a run made by fabula import")
    parser.add_argument(
        "--update-max-tokens",
        type=bounded_int(64, TOKEN_CAP),
        metavar="N",
        help="longest update reply, in tokens (default: NstAgent's, 4096)",
    )
    add_model_options(parser, stored="RUN")
    parser.set_defaults(handler=run)


def clock(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def check_derivable(store, run_dir: str) -> None:
    """Only an imported book is derived: a written run stored its state as it wrote."""
    from agent.manuscript.kind import NAME

    info = store.info()
    if info.pipeline != NAME:
        raise CLIError(
            f"{run_dir} is a {info.pipeline} run; fabula derive builds the state of a run made by "
            "fabula import (a written run stored its state as it was written)"
        )
    if not store.chapters():
        raise CLIError(f"{run_dir} has no chapters to derive")


def derived_on(store):
    """The model a run was last derived on (its latest session's transport; an import records
    none), so ``derive`` with no flags continues on the same server."""
    from agent.llm.options import StoredModel

    transport = store.sessions.last_transport()
    return StoredModel.from_record(transport, transport) if transport else None


def found_line(store, run_dir: str, chapters: int) -> str:
    """What the derived state holds after the last chapter, or that nothing could be derived."""
    from agent.nst.revise.derive import derived_state, holds, is_empty

    state = derived_state(store)
    if state is None or is_empty(state):
        return (
            f"{run_dir}: nothing could be derived: the model found 0 characters, 0 past events, "
            f"0 open requirements in {chapters} chapter(s) (a larger model may find them)"
        )
    return f"{run_dir}: the state after the last chapter holds {holds(state)}"


def run(args: argparse.Namespace) -> int:
    from agent.nst.revise.derive import derive, derived_state, failed, is_empty, todo

    with open_run(args.run_dir, readonly=False) as store:
        check_derivable(store, args.run_dir)
        if store.live_status() == "running":
            raise CLIError(
                f"{args.run_dir} is being written by another process; derive it once that stops", exit_code=1
            )
        left = todo(store)
        total = len(store.chapters())
        if not left:
            if is_empty(derived_state(store)):
                print(found_line(store, args.run_dir, total), file=sys.stderr)
            else:
                print(
                    f"{args.run_dir}: every chapter's state is derived ({total} chapters); nothing to do",
                    file=sys.stderr,
                )
            return 0
        retried = [i for i in failed(store) if i in left]
        options = choose_model(args, stored=derived_on(store))
        options, model = open_client(options)
        print(
            f"fabula: deriving the state of {len(left)} of {total} chapters"
            + (f" ({len(retried)} failed before: retried)" if retried else "")
            + f" with {options.describe()}",
            file=sys.stderr,
        )

        def show(step) -> None:
            title = f" {step.title!r}" if step.title else ""
            print(
                f"derive: chapter {step.index}{title} [{step.position}/{step.todo}]: {step.line}; "
                f"{step.calls} call{'s' if step.calls != 1 else ''}; {clock(step.elapsed_s)} elapsed, "
                f"ETA {clock(step.eta_s)}",
                file=sys.stderr,
            )

        try:
            with store_errors():
                result = derive(store, options, model, on_step=show, update_max_tokens=args.update_max_tokens)
        finally:
            model.close()
        still = failed(store)
        found = found_line(store, args.run_dir, total)
    if "nothing could be derived" in found:
        line = (
            f"{found}; {len(result.done) + result.skipped} chapter(s) read, {len(result.failed)} failed; "
            f"{result.calls} model call(s), all in the run's ledger"
        )
    else:
        line = (
            f"{args.run_dir}: {len(result.done)} chapter state(s) derived, {len(result.failed)} failed, "
            f"{result.skipped} already derived; {result.calls} model call(s), all in the run's ledger; "
            + found.split(": ", 1)[1]
        )
    if result.stopped:
        line += f"; stopped: {result.stopped}; fabula derive {args.run_dir} continues from there"
    if still:
        shown = ", ".join(str(i) for i in still[:20]) + (", ..." if len(still) > 20 else "")
        line += f"; failed: chapter(s) {shown} (fabula derive {args.run_dir} retries only those)"
    print(line, file=sys.stderr)
    return 1 if still or result.stopped else 0
