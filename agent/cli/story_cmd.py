"""``fabula story schema|check``: the Magnet story format as a JSON Schema, and a file checked
against the full validator (every problem, one line each)."""

from __future__ import annotations

import argparse
import json
import sys

from agent.cli.checks import cannot_write
from agent.store.paths import check_output_file, write_atomic


def add_parser(sub) -> None:
    parser = sub.add_parser("story", help="Magnet story definitions: JSON Schema, check a file")
    inner = parser.add_subparsers(dest="story_command", required=True, metavar="ACTION")
    schema = inner.add_parser("schema", help="print the JSON Schema of the story format (for editors)")
    schema.add_argument(
        "-o", "--out", "--output", dest="output", metavar="FILE", help="write to FILE (default: standard output)"
    )
    schema.set_defaults(handler=run_schema)
    check = inner.add_parser("check", help="validate a story definition; every problem on its own line")
    check.add_argument("story_file", metavar="STORY.toml", help="the story definition to check")
    check.set_defaults(handler=run_check)
    bible = inner.add_parser("from-bible", help="a story definition made from a story bible, for you to edit")
    bible.add_argument("bible", metavar="BIBLE", help="the story bible (TOML, YAML or Markdown)")
    bible.add_argument("-o", "--out", required=True, metavar="STORY.toml", help="the definition to write (new file)")
    bible.add_argument("--title", default="Untitled", help="the story's title (default: Untitled)")
    bible.add_argument("--genre", default="drama", help="its genre (default: drama)")
    bible.add_argument("--goal", help="the story's goal (default: the bible's first must-happen item)")
    bible.add_argument("--pages", type=float, default=10, help="its length in pages (default: 10)")
    bible.set_defaults(handler=run_from_bible)


def run_schema(args: argparse.Namespace) -> int:
    from agent.magnet.story_schema import story_json_schema

    text = json.dumps(story_json_schema(), ensure_ascii=False, indent=2) + "\n"
    if not args.output:
        sys.stdout.write(text)
        return 0
    target = check_output_file(args.output)
    try:
        write_atomic(target, text.encode("utf-8"))
    except OSError as exc:
        raise cannot_write(args.output, exc) from exc
    print(f"wrote {target}", file=sys.stderr)
    return 0


def run_check(args: argparse.Namespace) -> int:
    from agent.magnet.definition import load_definition

    story = load_definition(args.story_file)
    print(f"{args.story_file}: ok ({len(story.characters)} characters, {story.target_words} words)")
    return 0


def run_from_bible(args: argparse.Namespace) -> int:
    """Write the definition, then check it with Magnet's own validator (a bad one is removed again)."""
    from pathlib import Path

    from agent.bible.magnet_story import story_from_bible, to_toml
    from agent.cli.errors import CLIError
    from agent.cli.voice_inputs import story_bible
    from agent.magnet.definition import load_definition

    bible = story_bible(args.bible, flag="")
    if not bible["characters"]:
        raise CLIError(f"{args.bible}: a Magnet story needs characters; the bible has none")
    if not args.pages > 0:
        raise CLIError("--pages must be more than 0")
    target = check_output_file(args.out)
    if Path(target).exists():
        raise CLIError(f"{args.out} already exists; give a new file")
    text = to_toml(story_from_bible(bible, title=args.title, genre=args.genre, pages=args.pages, goal=args.goal))
    try:
        write_atomic(target, text.encode("utf-8"))
    except OSError as exc:
        raise cannot_write(args.out, exc) from exc
    try:
        story = load_definition(target)
    except Exception:
        Path(target).unlink(missing_ok=True)
        raise
    edits = text.count("(edit)")
    print(
        f"wrote {args.out}: {len(story.characters)} characters, {story.target_words} words; "
        f"{edits} field(s) marked (edit) for you to write"
        if edits
        else f"wrote {args.out}"
    )
    return 0
