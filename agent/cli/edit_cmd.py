"""``fabula edit RUN --chapter N [--file F]`` / ``--step N [--file F] [--var KEY=VALUE]``:
store a hand-edited version of a committed unit (the old one stays as a version) and mark
the later units stale; continue from the edit with ``fabula fork RUN --at N --out NEW``."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from agent.cli.errors import CLIError
from agent.cli.rundir import open_run, store_errors
from agent.store.edit import edit_chapter, edit_step, parse_step_document, step_document


def add_parser(sub) -> None:
    parser = sub.add_parser("edit", help="edit a committed chapter (or Magnet step) by hand; later units go stale",
                            description="Open a chapter's text (NstAgent family: --chapter) or a Magnet step's "
                            "paragraphs and world variables (--step) in $EDITOR, or read them from --file, and "
                            "store the result as a new version. Then `fabula fork RUN --at N --out NEW` continues "
                            "a copy from N+1.")
    parser.add_argument("run_dir", metavar="RUN")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--chapter", type=int, metavar="N")
    which.add_argument("--step", type=int, metavar="N")
    parser.add_argument("--file", metavar="F", help="take the new text from F ('-': standard input) instead of "
                        "$EDITOR; for --step, paragraphs then optionally the world-variables block")
    parser.add_argument("--title", help="--chapter: also change the chapter's title")
    parser.add_argument("--var", action="append", default=[], metavar="KEY=VALUE",
                        help="--step: set a world variable at that step (VALUE is JSON, else a string)")
    parser.set_defaults(handler=run)


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CLIError(f"cannot read {path}: {exc}") from exc


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


def run(args: argparse.Namespace) -> int:
    with open_run(args.run_dir, readonly=False) as store:
        if store.live_status() == "running":
            raise CLIError(f"{args.run_dir} is being written; edit it once it stops", exit_code=1)
        info = store.info()
        if args.chapter is not None:
            if info.unit_kind != "chapter":
                raise CLIError(f"{args.run_dir} is a {info.pipeline} run of steps; use --step")
            current = store.chapter(args.chapter)
            if current is None:
                raise CLIError(f"chapter {args.chapter} does not exist (last committed: {info.last_unit})")
            text = _read(args.file) if args.file else in_editor(current.text, ".md")
            if text == current.text and args.title is None:
                print("no change; nothing stored", file=sys.stderr)
                return 0
            with store_errors():
                chapter = edit_chapter(store, args.chapter, text, title=args.title)
            print(f"chapter {chapter.index}: stored version {chapter.version} ({chapter.words} words); "
                  f"version {chapter.version - 1} is kept", file=sys.stderr)
            print(f"the state after chapter {chapter.index} was not re-derived from the edit; chapters after it "
                  f"are marked stale. Continue from it: fabula fork {args.run_dir} --at {chapter.index} --out NEW",
                  file=sys.stderr)
            return 0
        if info.unit_kind != "step":
            raise CLIError(f"{args.run_dir} is a {info.pipeline} run of chapters; use --chapter")
        with store_errors():
            document = step_document(store, args.step)
        if args.file or not args.var:
            edited = _read(args.file) if args.file else in_editor(document, ".txt")
            paragraphs, variables = parse_step_document(edited)
        else:
            paragraphs, variables = None, {}
        for item in args.var:
            key, sep, raw = item.partition("=")
            if not sep or not key.strip():
                raise CLIError(f"--var needs KEY=VALUE, got {item!r}")
            try:
                variables[key.strip()] = json.loads(raw)
            except json.JSONDecodeError:
                variables[key.strip()] = raw
        with store_errors():
            revised, changed = edit_step(store, args.step, paragraphs, variables)
        if not revised and not changed:
            print("no change; nothing stored", file=sys.stderr)
            return 0
        print(f"step {args.step}: {len(revised)} paragraph(s) revised (old texts kept), "
              f"{len(changed)} world variable(s) set{': ' + ', '.join(changed) if changed else ''}", file=sys.stderr)
        if args.step < info.last_unit:
            print(f"steps after {args.step} are marked stale. Continue from it: "
                  f"fabula fork {args.run_dir} --at {args.step} --out NEW", file=sys.stderr)
        return 0
