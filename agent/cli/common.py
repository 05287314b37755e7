"""Habits every ``fabula`` command shares, added in one place after the parser tree is built.

Every command (each parser with a handler) gets ``-q/--quiet`` and ``-v/--verbose``. ``-q``: no
progress or other chatter on stderr; errors, warnings and the notes that go with an error still
print (through :func:`loud`). ``-v``: more detail (every model call's line, and an internal
error's traceback). A command that already defines both keeps its own (e.g. ``prompt -v``: usage
and latency); a lone ``--quiet`` is replaced by the shared pair.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import TextIO

_LOUD: TextIO | None = None
"""The real stderr while ``-q`` points ``sys.stderr`` at /dev/null (set by ``agent.cli.main``)."""


def loud() -> TextIO:
    """Where warnings and the notes that go with an error are printed: stderr, even under ``-q``."""
    return _LOUD or sys.stderr


QUIET_HELP = "no progress or other chatter on stderr (errors still print)"
VERBOSE_HELP = "more detail on stderr: every model call's line, and an internal error's traceback"


def walk(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ("fabula",)
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every parser of the tree with its command path, the root first."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from walk(child, (*path, name))


def is_command(parser: argparse.ArgumentParser) -> bool:
    """A parser that runs something (it sets a handler), as opposed to a group of subcommands only."""
    return parser.get_default("handler") is not None


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``-q/--quiet`` and ``-v/--verbose`` on ``parser``, unless it has both already."""
    have = parser._option_string_actions
    missing = [
        (short, long, help_)
        for short, long, help_ in (("-q", "--quiet", QUIET_HELP), ("-v", "--verbose", VERBOSE_HELP))
        if short not in have
    ]
    if not missing:
        return
    for short, long, help_ in missing:
        clash = [(option, have[option]) for option in (short, long) if option in have]
        if clash:  # a lone --quiet or --verbose of the command's own: the shared pair replaces it
            # typeshed asks for the incoming Action; argparse never reads it (its loop rebinds the name)
            parser._handle_conflict_resolve(None, clash)  # type: ignore[arg-type]
        parser.add_argument(short, long, action="store_true", help=help_)


def describe_subcommands(parser: argparse.ArgumentParser) -> None:
    """A subcommand without a description of its own gets its one-line help as one, so that its
    ``--help`` page says what it does."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, child in action.choices.items():
                if not child.description and helps.get(name):
                    text = str(helps[name])
                    child.description = text[0].upper() + text[1:] + ("" if text.endswith(".") else ".")


def apply_everywhere(root: argparse.ArgumentParser) -> None:
    for _, parser in walk(root):
        describe_subcommands(parser)
        if is_command(parser):
            add_output_options(parser)
