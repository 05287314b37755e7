"""The ``fabula`` command: the one place that wires the packages together.

Each subcommand lives in its own module with an ``add_parser(subparsers)`` function. fabula's
own errors become one ``fabula: error: ...`` line (exit 2: bad input, nothing was created; 1: the
run failed, ``fabula resume`` continues it); anything else is an internal error (exit 70), reported
with the path of a log holding the traceback. A reader that goes away (``fabula show RUN | head -1``)
ends the command quietly, as other CLIs do (exit 141, like a shell's SIGPIPE).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import traceback
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from agent.cli import (
    approve_cmd,
    batch_cmd,
    bible_cmd,
    check_cmd,
    common,
    completion_cmd,
    config_cmd,
    continue_cmd,
    derive_cmd,
    doctor_cmd,
    edit_cmd,
    eval_cmd,
    export_cmd,
    fork_cmd,
    grammars_cmd,
    import_cmd,
    lint_cmd,
    models_cmd,
    outline_cmd,
    progress,
    prompt_cmd,
    reconcile_cmd,
    repro_cmd,
    resume_cmd,
    review_cmd,
    revise_cmd,
    runs_cmd,
    search_cmd,
    sequel_cmd,
    serve_cmd,
    show_cmd,
    story_cmd,
    view_cmd,
    watch_cmd,
    write_cmd,
)
from agent.cli.command_groups import did_you_mean, grouped_help
from agent.cli.common import apply_everywhere
from agent.cli.errors import describe, log_internal_error
from agent.llm import heartbeat
from agent.store.paths import DB_NAME

COMMAND_MODULES = [
    prompt_cmd,
    models_cmd,
    serve_cmd,
    doctor_cmd,
    grammars_cmd,
    runs_cmd,
    show_cmd,
    search_cmd,
    export_cmd,
    outline_cmd,
    resume_cmd,
    write_cmd,
    import_cmd,
    derive_cmd,
    check_cmd,
    batch_cmd,
    eval_cmd,
    view_cmd,
    watch_cmd,
    fork_cmd,
    edit_cmd,
    continue_cmd,
    sequel_cmd,
    reconcile_cmd,
    story_cmd,
    config_cmd,
    repro_cmd,
    completion_cmd,
    lint_cmd,
    revise_cmd,
    approve_cmd,
    bible_cmd,
]


class _RootParser(argparse.ArgumentParser):
    """``fabula``'s own parser: its help lists the commands grouped (its epilog) instead of argparse's
    flat list of them; completion and the subcommands still see every command."""

    commands: argparse._SubParsersAction[argparse.ArgumentParser] | None = None

    def format_help(self) -> str:
        if self.commands is None:
            return super().format_help()
        self.commands.help = argparse.SUPPRESS
        try:
            return super().format_help()
        finally:
            self.commands.help = None


def build_parser() -> argparse.ArgumentParser:
    parser = _RootParser(
        prog="fabula",
        usage="fabula COMMAND [options]",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="fabula writes novels and stories on open-weight models, on your own machine.",
    )
    parser.add_argument("--version", action="version", version=f"fabula {version()}")
    # parser_class: the commands' own parsers are plain ones (the default is the root's class)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=argparse.ArgumentParser)
    for module in COMMAND_MODULES:
        module.add_parser(sub)
    parser.epilog = grouped_help({action.dest: action.help or "" for action in sub._choices_actions})
    parser.commands = sub
    apply_everywhere(parser)
    parser.set_defaults(root_parser=parser)  # for `fabula completion`, which completes every command
    return parser


def _commands(parser: argparse.ArgumentParser) -> list[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def version() -> str:
    try:
        return metadata.version("fabula")
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = review_cmd.old_review_spelling(list(sys.argv[1:] if argv is None else argv))
    if not argv:  # `fabula` alone: what it can do, grouped, and a first story
        parser.print_help()
        return 0
    commands = _commands(parser)
    if not argv[0].startswith("-") and argv[0] not in commands:
        print(f"fabula: error: {did_you_mean(argv[0], commands)}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    stderr = sys.stderr
    progress.VERBOSE = bool(getattr(args, "verbose", False))
    previous = _stop_on_sigterm()
    listener = _heartbeat(args, stderr)
    try:
        if getattr(args, "quiet", False):
            common._LOUD = stderr  # warnings and errors still reach the real stderr
            sys.stderr = open(os.devnull, "w")  # noqa: SIM115  (restored below)
        code = int(args.handler(args) or 0)
        sys.stdout.flush()  # a reader gone is found here, not in the interpreter's exit
        return code
    except KeyboardInterrupt as exc:
        how = "stopped (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        print(f"fabula: {how}{_resume_hint(args)}", file=stderr)
        return 143 if isinstance(exc, Terminated) else 130
    except BrokenPipeError:
        return _reader_gone()
    except Exception as exc:
        known = describe(exc)
        if known is not None:
            message, code = known
            print(f"fabula: error: {message}", file=stderr)
            return code
        log = log_internal_error(exc)
        where = f"; the traceback is in {log}" if log else ""
        if getattr(args, "verbose", False):
            traceback.print_exception(exc, file=stderr)
        print(
            f"fabula: internal error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            f"{where} (this is a bug in fabula, not in your input)",
            file=stderr,
        )
        return 70
    finally:
        if listener in heartbeat.LISTENERS:
            heartbeat.LISTENERS.remove(listener)
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        progress.VERBOSE = False
        common._LOUD = None
        if sys.stderr is not stderr:
            sys.stderr.close()
            sys.stderr = stderr


LIVE_LINE_COMMANDS = ("write", "resume", "continue", "sequel", "batch", "fork", "repro")
"""Commands whose progress display keeps a live line on a terminal (a heartbeat line there would break it)."""


def _heartbeat(args: argparse.Namespace, stderr):
    """One line on stderr for every 10 s a model call has not returned: what it does, how long, tokens so far."""
    if getattr(args, "quiet", False) or (args.command in LIVE_LINE_COMMANDS and stderr.isatty()):
        return None

    def say(role: str | None, elapsed: float, tokens: int | None) -> None:
        doing = progress.role_words().get(role or "", (role or "a model call").replace("_", " "))
        so_far = f", {tokens} tokens so far" if tokens is not None else ""
        print(f"fabula: still {doing}: {elapsed:.0f} s{so_far}", file=stderr, flush=True)

    heartbeat.LISTENERS.append(say)
    return say


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a shutdown): ends a command as Ctrl-C does, so a run's session is closed as
    interrupted, with everything committed kept, and ``fabula resume`` continues it."""


def _stop_on_sigterm():
    """Turn SIGTERM into :class:`Terminated` while a command runs (main thread only); returns the previous handler."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum, frame):
        raise Terminated()

    return signal.signal(signal.SIGTERM, stop)


def _resume_hint(args: argparse.Namespace) -> str:
    """For a command that writes a run: the run is kept, and the one command that continues it."""
    if args.command not in ("write", "resume", "continue", "sequel", "fork"):
        return ""
    run = getattr(args, "out", None) if args.command != "resume" else getattr(args, "run_dir", None)
    if not isinstance(run, str) or not (Path(run) / DB_NAME).exists():
        return ""
    return f"; every chapter committed so far is kept: fabula resume {run} continues it"


def _reader_gone() -> int:
    """Standard output's reader closed the pipe: stop quietly. Python would still try to flush
    stdout at exit and report that failure, so stdout is pointed at /dev/null first (as the
    CPython documentation on SIGPIPE recommends)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file descriptor (e.g. a captured stdout)
        pass
    return 141


if __name__ == "__main__":
    sys.exit(main())
