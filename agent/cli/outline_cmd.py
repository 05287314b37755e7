"""``fabula outline RUN [--json] [--edit | --file F]``: see the outline a run writes from, and change
it before its chapters are written (after ``fabula write nst|rollsum --plan-only``).

An edit is held to every rule of the planner (``agent.nst.plan.edit``) and refused in one line
with nothing stored; an accepted one keeps the previous outline in the run, and ``fabula resume``
writes the chapters from the new one.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from typing import Any

from agent.cli.edit_cmd import in_editor
from agent.cli.errors import CLIError
from agent.cli.rundir import open_run, store_errors
from agent.errors import InputError
from agent.nst.plan.edit import apply, check, stored_outline
from agent.nst.plan.form import parse, render_text, to_json
from agent.store import RunStore
from agent.store.export.markdown import author_line, story_title
from agent.store.export.titles import IMPORTED_KIND, Headings
from agent.store.writer.plan_edits import edits


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "outline",
        help="print a run's outline (title, chapters, targets, summaries) or "
        "change it before its chapters are written; an imported book's chapter list",
        description="Print the frozen outline of an nst or rollsum run, or change it: the "
        "book's title, and each unwritten chapter's title, target and summary. The edit is "
        "checked against every rule of the planner (the chapter count, each target within the "
        "gate around an even share, the total, non-empty titles and summaries) and stored only "
        "if it passes; fabula resume RUN then writes from it.",
    )
    parser.add_argument("run_dir", metavar="RUN", help="the run directory")
    parser.add_argument(
        "--json", action="store_true", help="print the outline as one JSON object (with --edit: edit that form instead)"
    )
    change = parser.add_mutually_exclusive_group()
    change.add_argument(
        "--edit",
        action="store_true",
        help="open the outline in $VISUAL or $EDITOR and store the result if it passes the checks",
    )
    change.add_argument(
        "--file",
        metavar="F",
        help="read the changed outline from F ('-': standard input), in the form this command "
        "prints: text, or JSON (as --json prints it)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if not args.edit and args.file is None:
        with open_run(args.run_dir) as store, store_errors():
            if store.info().pipeline == IMPORTED_KIND:
                print(_chapter_list(store, args.json), end="")
                return 0
            print(_shown(store, args.json), end="")
        return 0
    with open_run(args.run_dir, readonly=False) as store:
        if store.live_status() == "running":
            raise CLIError(f"{args.run_dir} is being written; change its outline once it stops", exit_code=1)
        with store_errors():
            shown = _shown(store, args.json)
        text = _read(args.file) if args.file is not None else in_editor(shown, ".json" if args.json else ".txt")
        try:
            edited = parse(text)
            check(store, *edited)  # a refused edit leaves no trace in the run
            with store_errors(), store.sessions.hold("outline", keep_status=True):  # no resume starts meanwhile
                edit = apply(store, *edited)
        except InputError as exc:
            kept = f"; your edit is kept in {_keep(text, args.json)}" if args.edit else ""
            raise CLIError(f"{str(exc).splitlines()[0]}{kept}") from None
        if edit.empty:
            print("no change; nothing stored", file=sys.stderr)
            return 0
        what = [f"chapter(s) {', '.join(map(str, edit.chapters))}"] if edit.chapters else []
        what += ["the title"] if edit.title else []
        print(
            f"outline stored: {' and '.join(what)} changed; the previous outline is kept in the run (edit "
            f"{len(edits(store))}); fabula resume {args.run_dir} writes from it",
            file=sys.stderr,
        )
    return 0


def _shown(store: RunStore, as_json: bool) -> str:
    """The outline as printed: the text form (a comment header, the premise) or the JSON form."""
    title, outline = stored_outline(store)
    info, premise = store.info(), store.plans.get("premise")
    words, written = info.config.get("words"), info.last_unit
    if as_json:
        return (
            json.dumps(
                to_json(
                    title,
                    outline,
                    run=str(store.run_dir),
                    words=words,
                    written=written,
                    premise=premise,
                    edits=len(edits(store)),
                ),
                ensure_ascii=False,
                indent=2,
            )
            + "\n"
        )
    notes = [
        f"The outline of {store.run_dir}: {len(outline)} chapters, {words} words, {written} written.",
        f"Change it with: fabula outline {store.run_dir} --edit (or --file F). Lines starting with # are ignored;",
        "the chapter count stays as planned and written chapters keep their entries.",
    ]
    return render_text(title, outline, premise=premise if isinstance(premise, str) else None, notes=notes)


def _chapter_list(store: RunStore, as_json: bool) -> str:
    """An imported book's chapters as it has them: number, words and heading (it has no plan to edit)."""
    headings = Headings.of(store)
    chapters: list[dict[str, Any]] = [
        {"chapter": c.index, "words": c.words, "heading": headings.heading(c.index, c.title)} for c in store.chapters()
    ]
    if as_json:
        return (
            json.dumps(
                {
                    "run": str(store.run_dir),
                    "title": story_title(store),
                    "author": author_line(store),
                    "chapters": chapters,
                },
                ensure_ascii=False,
                indent=2,
            )
            + "\n"
        )
    width = len(str(len(chapters)))
    lines = [
        f"{story_title(store)} by {author_line(store)}: {len(chapters)} chapters, "
        f"{sum(c['words'] for c in chapters)} words (imported; read it with fabula view "
        f"{store.run_dir})"
    ]
    lines += [f"{c['chapter']:>{width}}  {c['words']:>7} words  {c['heading']}" for c in chapters]
    return "\n".join(lines) + "\n"


MAX_OUTLINE_BYTES = 4 << 20
"""An outline is some KiB (a 200-chapter one well under 1 MiB); a --file over this is the wrong file."""


def _read(path: str) -> str:
    """The edited outline from ``--file`` by the one bounded reader (a FIFO, /dev/zero: one line)."""
    from agent.userinput import read_user_file

    return read_user_file(path, limit=MAX_OUTLINE_BYTES)


def _keep(text: str, as_json: bool) -> str:
    """Save a refused edit so the writer can fix it and pass it with --file."""
    with tempfile.NamedTemporaryFile(
        "w", prefix="fabula-outline-", suffix=".json" if as_json else ".txt", delete=False, encoding="utf-8"
    ) as handle:
        handle.write(text)
    return handle.name
