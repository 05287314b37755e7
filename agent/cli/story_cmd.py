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
    schema.add_argument("-o", "--out", "--output", dest="output", metavar="FILE",
                        help="write to FILE (default: standard output)")
    schema.set_defaults(handler=run_schema)
    check = inner.add_parser("check", help="validate a story definition; every problem on its own line")
    check.add_argument("story_file", metavar="STORY.toml", help="the story definition to check")
    check.set_defaults(handler=run_check)


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
