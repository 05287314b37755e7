"""``fabula export RUN_DIR [-o FILE] [--format md|txt|json|html|epub|docx|db]``: the story, verbatim; or, for
a Magnet run, ``--graph json|dot|svg``: its world graph. The format is the file's extension (``-o book.docx``
is a manuscript-format DOCX); an unknown extension, or one that disagrees with ``--format``, is refused in
one line, so a file is never written in a format its name does not say. ``--title``/``--author`` name the
book, for this export and the later ones (kept in the run's plan)."""

from __future__ import annotations

import argparse
import sys
from pathlib import PurePath
from typing import Any, cast

from agent.cli.checks import cannot_write
from agent.cli.errors import CLIError
from agent.cli.export_book import BINARY_FORMATS, BOOK_FORMATS, book_bytes
from agent.cli.rundir import open_run, store_errors
from agent.errors import InputError
from agent.magnet.history import GRAPH_FORMATS, render_graph
from agent.store import RunStore
from agent.store.export.markdown import FORMATS, export
from agent.store.lineage.series import SERIES_KEY, named_series
from agent.store.paths import check_output_file, write_atomic
from agent.store.writer.plan_edits import revise_plan
from agent.store.writer.versions import AtVersion


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "export",
        help="write a run's story as a DOCX manuscript, EPUB, HTML, Markdown, text or JSON",
        description="Export the story; the format is the file's extension (-o "
        "book.docx, book.epub, book.html, book.md, book.txt, book.json). docx: standard "
        "manuscript format (title page with author and word count, one chapter per page, "
        "double-spaced); epub: a book with a title page and a table of contents; html: one "
        "self-contained page for a reader (--with-ledger adds the state timeline and costs); "
        "md: YAML front matter for pandoc.",
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run directory")
    parser.add_argument(
        "--format",
        choices=(*FORMATS, *BOOK_FORMATS, "db"),
        default=None,
        help="md, txt, json, html, epub, docx, or db: a consistent single-file copy of the run "
        "database (SQLite backup; safe while the run is being written). Default: the extension "
        "of -o FILE; md on standard output",
    )
    parser.add_argument(
        "--with-ledger",
        action="store_true",
        help="html: add the run's state over time, call ledger and judgments after the story",
    )
    parser.add_argument(
        "--graph",
        choices=GRAPH_FORMATS,
        metavar="{json,dot,svg}",
        help="Magnet runs: export the world graph (entities and relations now) instead of the story",
    )
    parser.add_argument(
        "--version",
        type=int,
        metavar="N",
        help="the story with every edited chapter (or step) as it was at version N (1: as first "
        "written; a unit with fewer versions at its last); fabula show RUN_DIR --versions lists them",
    )
    parser.add_argument(
        "-o", "--out", "--output", dest="output", metavar="FILE", help="write to FILE (default, or -: standard output)"
    )
    parser.add_argument("--force", action="store_true", help="replace FILE if it exists (a regular file only)")
    parser.add_argument(
        "--title",
        metavar="TEXT",
        help="the book's title (default: the planner's); recorded in the run, so later exports keep it",
    )
    parser.add_argument(
        "--author",
        metavar="NAME",
        help="the author line (default: fabula and the model); recorded in the run, so later exports keep it",
    )
    parser.add_argument(
        "--series",
        metavar="NAME",
        help="the name of the series the book is in (a sequel's "
        "is book one's title until named; book one named before its sequels gives them the name); "
        "recorded in the run, so later exports keep it",
    )
    parser.set_defaults(handler=run)


EXTENSIONS = {
    ".md": "md",
    ".markdown": "md",
    ".txt": "txt",
    ".text": "txt",
    ".json": "json",
    ".html": "html",
    ".htm": "html",
    ".epub": "epub",
    ".docx": "docx",
    ".db": "db",
    ".sqlite": "db",
    ".sqlite3": "db",
}
"""The format each file extension names (``-o book.docx`` is a DOCX)."""


def chosen_format(given: str | None, output: str | None, graph: str | None = None) -> str:
    """The format to write: ``given``, else the extension of ``output``, else md (standard output).
    An extension that names another format than ``given``, or none fabula writes, is refused."""
    if graph or output is None:
        return given or "md"
    suffix = PurePath(output).suffix.lower()
    named = EXTENSIONS.get(suffix)
    if given is None:
        if named is None:
            known = ", ".join(
                sorted({e for e in EXTENSIONS if e not in (".markdown", ".text", ".htm", ".sqlite", ".sqlite3")})
            )
            what = f"'{suffix}'" if suffix else "no extension"
            raise CLIError(f"cannot tell the format of {output} ({what}): name it {known}, or give --format")
        return named
    if named is not None and named != given:
        raise CLIError(f"-o {output} says {named} but --format says {given}; make them agree")
    return given


def run(args: argparse.Namespace) -> int:
    """Every check first, then the file, then (last) ``--title``/``--author`` recorded in the run: a
    refused export records nothing."""
    output = None if args.output in (None, "-") else args.output
    with store_errors():
        target = check_output_file(output, force=args.force) if output else None
    args.format = chosen_format(args.format, output, args.graph)
    if args.with_ledger and args.format != "html":
        raise CLIError(f"--with-ledger is for the HTML export (this one is {args.format})")
    if args.version is not None and (args.version < 1 or args.graph or args.format == "db"):
        raise CLIError("--version N needs N >= 1 and is for the story (not --graph nor --format db)")
    meta = _book_meta(args)
    if args.format == "db":
        if target is None:
            raise CLIError("--format db needs -o FILE (a database is not written to standard output)")
        _record_book_meta(args, meta)  # the copy carries them
        return _copy_database(args, target)
    with open_run(args.run_dir) as opened:
        # the views answer every read of a RunStore (``__getattr__``), with their own chapters or plan on top
        store: RunStore = opened if args.version is None else cast(RunStore, AtVersion(opened, args.version))
        store = cast(RunStore, _WithMeta(store, meta)) if meta else store
        if args.graph:
            if store.info().unit_kind != "step":
                raise CLIError(f"--graph is for Magnet runs; this is a {store.info().pipeline} run")
            data = render_graph(store, args.graph).encode("utf-8")
        elif not store.chapters() and not store.paragraphs():
            raise CLIError(f"{args.run_dir} has no committed text yet")
        elif args.format in BOOK_FORMATS:
            data = book_bytes(store, args.format, with_ledger=args.with_ledger)
        else:
            data = export(store, args.format).encode("utf-8")
    if target is None:
        if args.format in BINARY_FORMATS and not args.graph:
            if sys.stdout.isatty():
                raise CLIError(f"an {args.format.upper()} is binary; give -o FILE.{args.format}")
            sys.stdout.flush()
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        else:
            sys.stdout.write(data.decode("utf-8"))
        _record_book_meta(args, meta)
        return 0
    try:
        write_atomic(target, data)
    except OSError as exc:
        raise cannot_write(args.output, exc) from exc
    _record_book_meta(args, meta)
    print(f"wrote {target} ({_described(args)})", file=sys.stderr)
    return 0


def _described(args: argparse.Namespace) -> str:
    if args.graph:
        return f"the world graph as {args.graph}"
    return {
        "docx": "a DOCX in manuscript format",
        "epub": "an EPUB book",
        "html": "an HTML page",
        "md": "Markdown",
        "txt": "plain text",
        "json": "JSON",
    }.get(args.format, args.format)


class _WithMeta:
    """A run read as if ``--title``/``--author`` were already recorded (they are, once the export is written)."""

    def __init__(self, store: Any, meta: dict[str, Any]) -> None:
        self._store = store
        self.plans = _PlansWithMeta(store.plans, meta)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


class _PlansWithMeta:
    """The run's plan records with ``--title``/``--author`` read as recorded."""

    def __init__(self, plans: Any, meta: dict[str, Any]) -> None:
        self._plans, self._meta = plans, meta

    def __getattr__(self, name: str) -> Any:
        return getattr(self._plans, name)

    def get(self, key: str, default: Any = None) -> Any:
        return self._meta[key] if key in self._meta else self._plans.get(key, default)


def _book_meta(args: argparse.Namespace) -> dict[str, Any]:
    """``--title``/``--author``/``--series`` by the one label rule (``agent.userinput``), the series as the
    run's whole series record with the new name; nothing is written."""
    from agent.userinput import checked_label

    try:
        meta: dict[str, Any] = {
            key: checked_label(value, what=f"--{key}")
            for key, value in (("title", args.title), ("author", args.author))
            if value is not None
        }
    except InputError as exc:
        raise CLIError(str(exc)) from None
    series_name = getattr(args, "series", None)
    if series_name is not None:
        try:
            name = checked_label(series_name, what="--series")
        except InputError as exc:
            raise CLIError(str(exc)) from None
        meta["series"] = name
    if meta:
        with open_run(args.run_dir, readonly=False) as store:  # can they be recorded (not read-only, not busy)?
            if "series" in meta:
                meta["series"] = named_series(store.plans.get(SERIES_KEY), meta["series"])
    return meta


def _record_book_meta(args: argparse.Namespace, values: dict[str, Any]) -> None:
    """Keep ``--title``/``--author`` in the run's plan (the previous values in its edit record)."""
    if not values:
        return
    with open_run(args.run_dir, readonly=False) as store, store_errors():
        changed = revise_plan(store, values, by="export")
    if changed:
        print(f"recorded {' and '.join(changed)} in {args.run_dir}", file=sys.stderr)


def _copy_database(args: argparse.Namespace, target) -> int:
    if target is None:
        raise CLIError("--format db needs -o FILE (a database is not written to standard output)")
    with open_run(args.run_dir) as store:
        try:
            store.backup_to(target)
        except OSError as exc:
            raise cannot_write(args.output, exc) from exc
    print(f"wrote {target} (a complete copy of the run database)", file=sys.stderr)
    return 0
