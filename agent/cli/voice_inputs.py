"""The writer's own inputs to a run: ``--style FILE`` (a sample of their prose), ``--bible FILE`` (their
world) and ``--language``. Each is read and checked before anything is created; a bad file is one line
(the bible: one line per problem, each with its line number) and exit 2.

``style_guide(path)`` is the one entry point for any command that takes ``--style`` (write, continue,
sequel; revise may call it too).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from agent.cli.errors import CLIError
from agent.errors import InputError

MAX_SAMPLE_WORDS = 60_000
"""A longer style sample is cut to this: the measure needs a few thousand words, the prompt a few passages."""


def add_voice_options(parser: argparse.ArgumentParser, *, bible: bool = True) -> None:
    parser.add_argument(
        "--style",
        metavar="FILE",
        help="a sample of your own prose (a few thousand words; any "
        "format fabula imports): every chapter is written in its voice, and measured against it",
    )
    if bible:
        parser.add_argument(
            "--bible",
            metavar="FILE",
            help="a story bible (TOML, YAML or Markdown): characters "
            "with canon facts, places, rules, timeline, must-happen; check it with fabula bible check",
        )
    parser.add_argument(
        "--language",
        metavar="LANG",
        help="the language to write in (a name or code, e.g. zh, French); default: the prompt's language",
    )


def style_guide(path: str) -> dict[str, Any]:
    """The stored style guide of the sample at ``path`` (``agent.style.guide.build_guide``); CLIError if bad."""
    from agent.manuscript.reading import read_manuscript
    from agent.style.guide import build_guide
    from agent.text import count_words

    try:
        manuscript = read_manuscript(Path(path))
    except InputError as exc:
        raise CLIError(f"--style {path}: {exc}") from None
    except OSError as exc:
        raise CLIError(f"--style {path}: cannot read it: {exc.strerror or exc}") from None
    text = "\n\n".join(piece.text for piece in manuscript.pieces)
    if count_words(text) > MAX_SAMPLE_WORDS:
        text = " ".join(text.split(" ")[:MAX_SAMPLE_WORDS])
    try:
        return build_guide(text, source=Path(path).name)
    except ValueError as exc:
        raise CLIError(f"--style {path}: {exc}") from None


def story_bible(path: str, flag: str = "--bible") -> dict[str, Any]:
    """The bible at ``path`` in its one shape; CLIError whose details name every problem with its line
    (``flag``: the option that named the file, or "" for a command that takes it as an argument)."""
    from agent.bible.read import BibleError, read_bible

    try:
        return read_bible(path)
    except BibleError as exc:
        lines = exc.lines()
        lead = f"{flag} " if flag else ""
        if len(lines) == 1:
            raise CLIError(f"{lead}{lines[0]}") from None
        raise CLIError(f"{lead}{path}: {len(lines)} problems", details=lines) from None


def voice_notes(args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``(plan notes, initial state)`` of a new run from ``--style`` and ``--bible`` (read and checked now)."""
    from agent.bible.seed import initial_narrative

    notes: dict[str, Any] = {}
    initial = None
    if getattr(args, "style", None):
        notes["style"] = style_guide(args.style)
    if getattr(args, "bible", None):
        bible = story_bible(args.bible)
        notes["bible"] = bible
        initial = {"narrative": initial_narrative(bible)}
    return notes, initial
