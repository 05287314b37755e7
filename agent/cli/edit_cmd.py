"""``fabula edit RUN --chapter N [--file F] [--no-rederive]`` / ``--step N [--file F] [--var KEY=VALUE]``:
store a hand-edited version of a committed unit (the old one stays as a version) and mark
the later units stale; ``fabula reconcile RUN`` then brings the story up to date with the edit.

A chapter's state is re-derived from the edited text by the run's own model, one call
(``agent.pipelines.rederive``); the chapters after it keep their text and states and are
marked stale. A Magnet step's world variables are what the writer sets with the edit
(``--var`` or the document's variables block): the world state is not re-derived from
edited paragraphs."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from agent.cli.errors import CLIError
from agent.cli.options import add_model_options, choose_model, open_client
from agent.cli.rundir import open_run, store_errors
from agent.llm.options import LLMOptions
from agent.pipelines import after_edit
from agent.settings import parse_assignments
from agent.store import RunStore
from agent.store.lineage.fork import STALE_KEY
from agent.store.writer.edit import (
    edit_chapter,
    edit_step,
    mark_stale,
    parse_step_document,
    state_stale_from,
    step_document,
)
from agent.store.writer.review import record_action


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "edit",
        help="edit a committed chapter (or Magnet step) by hand; later units go stale",
        description="Open a chapter's text (NstAgent family: --chapter) or a Magnet step's "
        "paragraphs and world variables (--step) in $EDITOR, or read them from --file, and "
        "store the result as a new version. Then `fabula reconcile RUN` brings an NstAgent story "
        "up to date with the edit (`fabula fork RUN --at N --out NEW` continues a copy from N+1).",
    )
    parser.add_argument("run_dir", metavar="RUN", help="the run directory")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--chapter", type=int, metavar="N", help="the chapter to edit (NstAgent, RollSum, Direct)")
    which.add_argument("--step", type=int, metavar="N", help="the Magnet step to edit (paragraphs and world variables)")
    parser.add_argument(
        "--file",
        metavar="F",
        help="take the new text from F ('-': standard input) instead of "
        "$EDITOR; for --step, paragraphs then optionally the world-variables block",
    )
    parser.add_argument("--title", help="--chapter: also change the chapter's title")
    parser.add_argument(
        "--var",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="--step: set a world variable at that step (VALUE is JSON, else a string)",
    )
    parser.add_argument(
        "--no-rederive",
        action="store_true",
        help="--chapter: do not re-derive the chapter's state from the edited text (no model "
        "call; the state after it is then marked stale)",
    )
    add_model_options(parser, stored="RUN")
    parser.set_defaults(handler=run)


MAX_EDIT_BYTES = 16 << 20
"""A chapter or a step is some KiB; a --file over this is the wrong file (or /dev/zero)."""


def _read(path: str) -> str:
    """``--file`` by the one bounded reader (``agent.userinput``)."""
    from agent.userinput import read_user_file

    return read_user_file(path, limit=MAX_EDIT_BYTES)


def in_editor(text: str, suffix: str) -> str:
    """``text`` after the user edited it in ``$VISUAL``/``$EDITOR`` (refused if neither is set)."""
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR")
    if not editor:
        raise CLIError("set $EDITOR (or give --file F)")
    fd, name = tempfile.mkstemp(prefix="fabula-edit-", suffix=suffix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        if subprocess.call([*shlex.split(editor), name]) != 0:
            raise CLIError("the editor exited with an error; nothing was stored", exit_code=1)
        return Path(name).read_text(encoding="utf-8")
    finally:
        Path(name).unlink(missing_ok=True)


def _edit_chapter(args: argparse.Namespace, store: RunStore) -> int:
    info = store.info()
    if info.unit_kind != "chapter":
        raise CLIError(f"{args.run_dir} is a {info.pipeline} run of steps; use --step")
    current = store.chapter(args.chapter)
    if current is None:
        raise CLIError(f"chapter {args.chapter} does not exist (last committed: {info.last_unit})")
    from agent import pipelines

    llm = None if args.no_rederive else choose_model(args, stored=pipelines.stored_model(store))  # bad flags: now
    text = _read(args.file) if args.file else in_editor(current.text, ".md")
    if text == current.text and args.title is None:
        if args.no_rederive or state_stale_from(store) != args.chapter:
            print("no change; nothing stored", file=sys.stderr)
            return 0
        what = store.plans.get(STALE_KEY)["what"]  # a re-derivation that failed or was skipped: try again
        print(f"chapter {args.chapter} unchanged; its state is stale: re-deriving it", file=sys.stderr)
    else:
        with store_errors():
            chapter = edit_chapter(store, args.chapter, text, title=args.title)
        what = f"chapter {chapter.index} edited (version {chapter.version})"
        print(
            f"chapter {chapter.index}: stored version {chapter.version} ({chapter.words} words); "
            f"version {chapter.version - 1} is kept",
            file=sys.stderr,
        )
    if args.no_rederive:
        line = f"the state after chapter {args.chapter} was not re-derived (--no-rederive) and is marked stale"
        ok = False
    else:
        line, ok = _rederive(store, args.chapter, llm)
    with store_errors():
        mark_stale(store, args.chapter, what=what, state_rederived=ok)
        stored = store.chapter(args.chapter)
        assert stored is not None, "the chapter was read above; a committed chapter is never removed"
        record_action(store, "edit", unit=args.chapter, version=stored.version)
    print(line + _next_step(args, store, ok), file=sys.stderr)
    return 0 if ok or args.no_rederive else 1


def _rederive(store: RunStore, chapter: int, llm: LLMOptions | None) -> tuple[str, bool]:
    """Re-derive the edited chapter's state on the run's model; a server that cannot be reached
    keeps the edit (already stored) and the state marked stale, to retry later."""
    from agent import pipelines

    if pipelines.get(store.info().pipeline).rederive is None or llm is None:
        with store_errors():
            result = pipelines.rederive(store, chapter, llm=llm)
        return result.what, result.ok
    try:
        llm, model = open_client(llm)
        print(f"fabula: re-deriving the state of chapter {chapter} with {llm.describe()}", file=sys.stderr)
    except CLIError as exc:
        cause = str(exc).removesuffix("; nothing was started")
        return f"the edit is stored but the state after it was not re-derived: {cause}", False
    try:
        with store_errors():
            result = pipelines.rederive(store, chapter, llm=llm, model=model)
    finally:
        model.close()
    return result.what, result.ok


def _next_step(args: argparse.Namespace, store: RunStore, ok: bool) -> str:
    """What the writer can do next, as the tail of the one line ``edit`` prints."""
    n, last = args.chapter, store.info().last_unit
    tail = ""
    if n < last:
        later = f"chapter {last} was" if n + 1 == last else f"chapters {n + 1}-{last} were"
        tail = (
            f"; {later} written before the edit and {'is' if n + 1 == last else 'are'} marked stale; next: "
            f"{after_edit(store, n, args.run_dir)}"
        )
    elif store.info().status != "completed":
        tail = f"; fabula resume {args.run_dir} continues from it"
    if not ok and not args.no_rederive:
        tail += f" (to retry, run fabula edit {args.run_dir} --chapter {n} again without changing the text)"
    return tail


def check_flags(args: argparse.Namespace) -> None:
    """Each flag goes with the unit it edits: none is silently ignored."""
    if args.chapter is not None and args.var:
        raise CLIError("--var sets a Magnet step's world variable; it does not go with --chapter")
    if args.step is not None and args.title is not None:
        raise CLIError("--title changes a chapter's title; it does not go with --step")
    if args.step is not None and args.no_rederive:
        raise CLIError("--no-rederive goes with --chapter (a step's world state is what the edit sets)")
    if args.title is not None:
        from agent.userinput import MAX_TITLE, clean_label

        if (
            clean_label(args.title) != " ".join(args.title.split())
            or not args.title.strip()
            or len(args.title) > MAX_TITLE
        ):
            raise CLIError(
                f"--title {args.title[:40]!r}: give a title of 1-{MAX_TITLE} printable characters on one line"
            )


def run(args: argparse.Namespace) -> int:
    check_flags(args)
    with open_run(args.run_dir, readonly=False) as store:
        if store.live_status() == "running":
            raise CLIError(f"{args.run_dir} is being written; edit it once it stops", exit_code=1)
        info = store.info()
        if args.chapter is not None:
            return _edit_chapter(args, store)
        if info.unit_kind != "step":
            raise CLIError(f"{args.run_dir} is a {info.pipeline} run of chapters; use --chapter")
        with store_errors():
            document = step_document(store, args.step)
        if args.file or not args.var:
            edited = _read(args.file) if args.file else in_editor(document, ".txt")
            paragraphs, variables = parse_step_document(edited)
        else:
            paragraphs, variables = None, {}
        variables.update(parse_assignments(args.var, flag="--var"))
        with store_errors():
            revised, changed = edit_step(store, args.step, paragraphs, variables)
        if not revised and not changed:
            print("no change; nothing stored", file=sys.stderr)
            return 0
        print(
            f"step {args.step}: {len(revised)} paragraph(s) revised (old texts kept), "
            f"{len(changed)} world variable(s) set{': ' + ', '.join(changed) if changed else ''}",
            file=sys.stderr,
        )
        print(
            "the world state at that step is what the edit sets; it is not re-derived from edited paragraphs"
            + (
                f"; steps after {args.step} are marked stale. Continue from it: fabula fork {args.run_dir} "
                f"--at {args.step} --out NEW"
                if args.step < info.last_unit
                else ""
            ),
            file=sys.stderr,
        )
        return 0
