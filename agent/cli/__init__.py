"""The ``fabula`` command: the one place that wires the packages together.

Each subcommand lives in its own module with an ``add_parser(subparsers)`` function. Any
expected failure becomes one ``fabula: error: ...`` line and a non-zero exit, never a
traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agent.cli import (
    edit_cmd,
    eval_cmd,
    export_cmd,
    fork_cmd,
    grammars_cmd,
    models_cmd,
    prompt_cmd,
    resume_cmd,
    runs_cmd,
    search_cmd,
    serve_cmd,
    show_cmd,
    view_cmd,
    watch_cmd,
    write_cmd,
)
from agent.cli.errors import CLIError, describe

COMMAND_MODULES = [prompt_cmd, models_cmd, serve_cmd, grammars_cmd, runs_cmd, show_cmd, search_cmd, export_cmd,
                   resume_cmd, write_cmd, eval_cmd, view_cmd, watch_cmd, fork_cmd, edit_cmd]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fabula",
        description="Local-first long-form fiction on open-weight models.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except KeyboardInterrupt:
        print("fabula: interrupted", file=sys.stderr)
        return 130
    except CLIError as exc:
        print(f"fabula: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # expected library errors are turned into one line here
        message = describe(exc)
        if message is None:
            raise
        print(f"fabula: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
