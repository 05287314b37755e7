"""``fabula grammars``: list the registered grammars and export their JSON Schemas."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(sub) -> None:
    parser = sub.add_parser("grammars", help="list grammars or export their JSON Schemas")
    inner = parser.add_subparsers(dest="grammars_command", required=True, metavar="ACTION")
    listing = inner.add_parser("list", help="list registered grammars")
    listing.set_defaults(handler=run_list)
    export = inner.add_parser("export", help="write <name>.schema.json for every grammar into DIR")
    export.add_argument("directory", type=Path, nargs="?", metavar="DIR", help="the folder (made if missing)")
    export.add_argument("-o", "--out", type=Path, dest="out", metavar="DIR", help="the folder, as an option")
    export.set_defaults(handler=run_export)


def run_list(args: argparse.Namespace) -> int:
    from grammars import all_grammars

    for name, cls in all_grammars().items():
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        print(f"{name:24} {cls.__module__}.{cls.__name__}  {doc}")
    return 0


def run_export(args: argparse.Namespace) -> int:
    from agent.cli.checks import output_dir
    from agent.cli.errors import CLIError
    from grammars import export_schemas

    if (args.directory is None) == (args.out is None):
        raise CLIError("give the folder once: fabula grammars export DIR (or -o DIR)")
    for path in export_schemas(output_dir(args.directory or args.out, flag="DIR")):
        print(path)
    return 0
