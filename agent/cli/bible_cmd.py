"""``fabula bible check FILE``: every problem of a story bible named with its line, before a run uses it."""

from __future__ import annotations

import argparse

from agent.cli.voice_inputs import story_bible


def add_parser(sub) -> None:
    parser = sub.add_parser(
        "bible",
        help="story bibles: check one before writing from it",
        description="A story bible (TOML, YAML or Markdown with headings) gives a run its "
        "characters with canon facts, places, rules, timeline and must-happen requirements.",
    )
    actions = parser.add_subparsers(dest="bible_action", metavar="ACTION", required=True)
    check = actions.add_parser("check", help="name every problem of a bible with its line (exit 2 if any)")
    check.add_argument("file", metavar="FILE", help="the bible (.toml, .yaml/.yml, else Markdown)")
    check.set_defaults(handler=run_check)
    export = actions.add_parser(
        "export",
        help="a bible from a book's narrative state (NstAgent, or an imported "
        "book after fabula derive), for a sequel or a series",
    )
    export.add_argument("run_dir", metavar="RUN", help="the run")
    export.add_argument(
        "-o",
        "--out",
        metavar="FILE",
        help="write it here (.toml keeps every key; else Markdown); default: Markdown on stdout",
    )
    export.set_defaults(handler=run_export)
    schema = actions.add_parser("schema", help="print the JSON Schema of a bible (for TOML and YAML editors)")
    schema.set_defaults(handler=run_schema)


def run_check(args: argparse.Namespace) -> int:
    bible = story_bible(args.file, flag="")
    counts = ", ".join(
        f"{len(bible[k])} {k.replace('_', ' ')}" for k in ("characters", "places", "rules", "timeline", "must_happen")
    )
    print(f"{args.file}: a valid story bible ({counts})")
    return 0


def run_schema(args: argparse.Namespace) -> int:
    from agent.bible.schema import schema_text

    print(schema_text(), end="")
    return 0


def run_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from agent.bible.write import from_state, to_markdown, to_toml
    from agent.cli.errors import CLIError
    from agent.cli.rundir import open_run
    from agent.errors import InputError
    from agent.nst.revise.continuation import finished_book

    with open_run(args.run_dir) as store:
        try:
            found = finished_book(store, command="fabula bible export")
        except InputError as exc:
            raise CLIError(str(exc)) from None
        bible = from_state(found.state.to_json(), store.plans.get("bible"))
    text = to_toml(bible) if args.out and args.out.lower().endswith(".toml") else to_markdown(bible)
    if not args.out:
        print(text, end="")
        return 0
    target = Path(args.out)
    if target.exists():
        raise CLIError(f"{args.out} already exists; give a new file")
    target.write_text(text, encoding="utf-8")
    print(
        f"{args.out}: {len(bible['characters'])} characters, {len(bible['timeline'])} past events, "
        f"{len(bible['must_happen'])} open requirements"
    )
    return 0
