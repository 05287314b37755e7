"""``fabula import FILE --out RUN``: a manuscript written elsewhere becomes an ordinary run.

Text, Markdown, EPUB or DOCX; chapters found at their headings (or ``--split REGEX``); what is
not story is left out, one line each on stderr. ``--dry-run`` lists the chapters it would make
and writes nothing. Every problem with the file or the flags is one line, exit 2, nothing written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agent.cli.errors import CLIError
from agent.cli.rundir import store_errors
from agent.errors import InputError
from agent.manuscript.importer import check_out, source_config, write_run
from agent.manuscript.model import Manuscript
from agent.manuscript.read_text import checked_size
from agent.manuscript.reading import FORMATS, read_manuscript
from agent.userinput import checked_label, clean_label


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "import",
        help="import a manuscript (text, Markdown, EPUB, DOCX) as a run",
        description="Split a book into chapters at its headings (# Markdown headings, "
        "'Chapter 12', 'CHAPTER XII. Title.', roman numerals, EPUB spine items) and store it "
        "as a run that show, search, view, export and eval metrics read. Project Gutenberg's "
        "licence, a table of contents and front matter are left out, and said so.",
    )
    parser.add_argument("file", metavar="FILE", help="the manuscript: .txt, .md, .epub or .docx")
    parser.add_argument(
        "-o", "--out", metavar="RUN", help="the run folder to make (new or empty; not needed with --dry-run)"
    )
    parser.add_argument(
        "--split", metavar="REGEX", help="start a chapter at every line REGEX matches (for a book without headings)"
    )
    parser.add_argument("--format", choices=FORMATS, default="auto", help="how to read FILE (default: by its suffix)")
    parser.add_argument("--dry-run", action="store_true", help="list the chapters it would make; write nothing")
    parser.add_argument(
        "--keep-front-matter",
        action="store_true",
        help="keep what is left out by default (a title page, a table of contents, a preface, back "
        "matter) as chapters; Project Gutenberg's licence still goes. Without it, each part left out "
        "is said with its word count and kept in the run",
    )
    parser.add_argument("--title", metavar="TEXT", help="the book's title (default: the file's own)")
    parser.add_argument("--author", metavar="NAME", help="the author (default: the file's own)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        args.title, args.author = (
            None if value is None else checked_label(value, what=flag)
            for value, flag in ((args.title, "--title"), (args.author, "--author"))
        )
    except InputError as exc:
        raise CLIError(str(exc)) from None
    checked_size(path)  # refused from stat alone, before any byte is read
    if args.out is None and not args.dry_run:
        raise CLIError("give the run folder to make: fabula import FILE -o RUN (or --dry-run to list the chapters)")
    if args.out is not None:
        with store_errors():
            check_out(args.out)
    manuscript = read_manuscript(path, split=args.split, fmt=args.format, keep_front=args.keep_front_matter)
    for note in manuscript.notes:
        print(f"fabula: {note}", file=sys.stderr)
    if args.dry_run:
        width = len(str(len(manuscript.pieces)))
        for index, piece in enumerate(manuscript.pieces, start=1):
            print(f"{index:>{width}}  {piece.words:>7} words  {clean_label(piece.title) or '(untitled)'}")
        print(f"{len(manuscript.pieces)} chapters, {manuscript.words} words (dry run: nothing written)")
        print(f"fabula: {chosen_names(args, manuscript, path)[2]}", file=sys.stderr)
        return 0
    title, author, said = chosen_names(args, manuscript, path)
    with store_errors():
        folder = write_run(
            manuscript, args.out, source_config(path, manuscript, args.split), title=title, author=author
        )
    print(f"fabula: {said}", file=sys.stderr)
    print(
        f"imported {len(manuscript.pieces)} chapters, {manuscript.words} words into {folder}; read it with "
        f"fabula outline {folder}, or fabula view {folder}",
        file=sys.stderr,
    )
    return 0


def chosen_names(args: argparse.Namespace, manuscript: Manuscript, path: Path) -> tuple[str, str | None, str]:
    """``(title, author, the line that says so)``: --title/--author, else the file's own (its metadata, its
    Gutenberg header or its first lines), else the title from the file's name and no author."""
    title, author = args.title or manuscript.title, args.author or manuscript.author
    source = "--title/--author" if args.title or args.author else manuscript.found_in
    if not title:
        title, source = path.stem.replace("_", " ").replace("-", " ").strip() or path.name, "the file's name"
    said = f'titled "{title}" by {author or "an unknown author (Anonymous)"}, from {source or "the file name"}'
    return title, author, said + "; change it with fabula export RUN --title TEXT --author NAME"
