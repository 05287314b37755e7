"""The ``fabula`` command: the one place that wires the packages together.

Each subcommand lives in its own module with an ``add_parser(subparsers)`` function. fabula's
own errors become one ``fabula: error: ...`` line (exit 2: bad input, 1: the run failed);
anything else is an internal error, reported with the path of a log holding the traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import metadata

from agent.cli import (
    batch_cmd,
    config_cmd,
    edit_cmd,
    eval_cmd,
    export_cmd,
    fork_cmd,
    grammars_cmd,
    models_cmd,
    outline_cmd,
    prompt_cmd,
    resume_cmd,
    runs_cmd,
    search_cmd,
    serve_cmd,
    show_cmd,
    story_cmd,
    view_cmd,
    watch_cmd,
    write_cmd,
)
from agent.cli.errors import describe, log_internal_error

COMMAND_MODULES = [prompt_cmd, models_cmd, serve_cmd, grammars_cmd, runs_cmd, show_cmd, search_cmd, export_cmd,
                   outline_cmd, resume_cmd, write_cmd, batch_cmd, eval_cmd, view_cmd, watch_cmd, fork_cmd, edit_cmd,
                   story_cmd, config_cmd]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fabula",
        description="Local-first long-form fiction on open-weight models.",
    )
    parser.add_argument("--version", action="version", version=f"fabula {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_parser(sub)
    return parser


def version() -> str:
    try:
        return metadata.version("fabula")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print("fabula: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        known = describe(exc)
        if known is not None:
            message, code = known
            print(f"fabula: error: {message}", file=sys.stderr)
            return code
        log = log_internal_error(exc)
        where = f"; the traceback is in {log}" if log else ""
        print(f"fabula: internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
              f"{where} (this is a bug in fabula, not in your input)", file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
