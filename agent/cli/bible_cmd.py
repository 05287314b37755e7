"""``fabula bible check FILE``: every problem of a story bible named with its line, before a run uses it."""

from __future__ import annotations

import argparse

from agent.cli.voice_inputs import story_bible


def add_parser(sub) -> None:
    parser = sub.add_parser("bible", help="story bibles: check one before writing from it",
                            description="A story bible (TOML, YAML or Markdown with headings) gives a run its "
                            "characters with canon facts, places, rules, timeline and must-happen requirements.")
    actions = parser.add_subparsers(dest="bible_action", metavar="ACTION", required=True)
    check = actions.add_parser("check", help="name every problem of a bible with its line (exit 2 if any)")
    check.add_argument("file", metavar="FILE", help="the bible (.toml, .yaml/.yml, else Markdown)")
    check.set_defaults(handler=run_check)
    schema = actions.add_parser("schema", help="print the JSON Schema of a bible (for TOML and YAML editors)")
    schema.set_defaults(handler=run_schema)


def run_check(args: argparse.Namespace) -> int:
    bible = story_bible(args.file)
    counts = ", ".join(f"{len(bible[k])} {k.replace('_', ' ')}" for k in
                       ("characters", "places", "rules", "timeline", "must_happen"))
    print(f"{args.file}: a valid story bible ({counts})")
    return 0


def run_schema(args: argparse.Namespace) -> int:
    from agent.bible.schema import schema_text

    print(schema_text(), end="")
    return 0
