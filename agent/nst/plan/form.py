"""The frozen outline as a writer reads and edits it: one text form that ``fabula outline`` prints
and ``fabula outline --edit``/``--file`` reads back, and the same outline as JSON (``--json``).

The text form::

    Title: The Bell of the Drowned

    Chapter 1: The Keeper
    Target: 600 words
    What happens in the chapter (the summary), on as many lines as it needs.

Lines starting with ``#`` are comments (the premise is shown there: it is the planner's input,
not the chapters'). Reading either form only parses it; the planner's rules are checked by
``agent.nst.plan.edit``.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Sequence
from typing import Any

from agent.errors import InputError
from agent.limits import MAX_WORDS
from agent.userinput import (
    MAX_DESCRIPTION,
    checked_label,
    checked_text,
    clean_label,
    loads_json,
    printable,
    whole_number,
)

MAX_OUTLINE_NUMBER = MAX_WORDS
"""The largest number the text form reads (a chapter id or a target); the planner's rules then check
each against the run (``agent.nst.plan.edit``)."""

CHAPTER = re.compile(r"^chapter[ \t]+([0-9]+)[ \t]*:(.*)$", re.IGNORECASE)
TARGET = re.compile(r"^target[ \t]*:[ \t]*(\S+)(.*)$", re.IGNORECASE)
TITLE = re.compile(r"^title[ \t]*:(.*)$", re.IGNORECASE)
"""Each pattern is linear (no lazy group before optional blanks, which backtracks quadratically on a
long run of blanks) and runs on a stripped line; the captured text is stripped in code."""
FIELDS = ("id", "title", "target_words", "description")


class OutlineFormError(InputError, ValueError):
    """An edited outline that cannot be read (before any planner rule is checked)."""


def render_text(
    title: str | None, outline: list[dict[str, Any]], *, premise: str | None = None, notes: Sequence[str] = ()
) -> str:
    """The text form; ``notes`` and the premise become comment lines."""
    lines = [f"# {note}" for note in notes]
    if premise:
        lines += [
            "# Premise (the planner's; not read back):",
            *(
                f"#   {line}" if line else "#"
                for paragraph in premise.strip().splitlines()
                for line in textwrap.wrap(paragraph, 96) or [""]
            ),
        ]
    lines += [f"Title: {clean_label(title or '')}"]
    for c in outline:
        lines += [
            "",
            f"Chapter {c['id']}: {clean_label(str(c['title']))}",
            f"Target: {c['target_words']} words",
            "\n".join(printable(line) for line in str(c["description"]).strip().split("\n")),
        ]
    return "\n".join(lines) + "\n"


def parse_text(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The title and chapters of the text form; ``OutlineFormError`` names the line that breaks it."""
    title: str | None = None
    chapters: list[dict[str, Any]] = []
    body: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("#"):
            continue
        if (match := CHAPTER.match(line)) is not None:
            _close(chapters, body)
            chapters.append(
                {
                    "id": _number(match.group(1), number, "chapter number"),
                    "title": match.group(2).strip(),
                    "target_words": None,
                    "description": "",
                }
            )
            body = []
        elif chapters and chapters[-1]["target_words"] is None and line:
            target = TARGET.match(line)
            if (
                target is None
                or target.group(2).strip().lower() not in ("", "word", "words")
                or not target.group(1).isascii()
                or not target.group(1).isdigit()
            ):
                raise OutlineFormError(
                    f"line {number}: chapter {chapters[-1]['id']} needs 'Target: N words' "
                    f"right after its heading, got {line[:60]!r}"
                )
            chapters[-1]["target_words"] = _number(target.group(1), number, "target")
        elif chapters:
            body.append(raw.rstrip())
        elif (match := TITLE.match(line)) is not None:
            if title is not None:
                raise OutlineFormError(f"line {number}: a second 'Title:' line")
            title = match.group(1).strip()
        elif line:
            raise OutlineFormError(f"line {number}: expected 'Title: ...' or 'Chapter N: TITLE', got {line[:60]!r}")
    _close(chapters, body)
    for c in chapters:
        if c["target_words"] is None:
            raise OutlineFormError(f"chapter {c['id']} has no 'Target: N words' line")
    return title or "", chapters


def _number(text: str, line: int, what: str) -> int:
    """A number of the text form by the one rule for numbers users type (``agent.userinput``)."""
    try:
        return whole_number(text, low=0, high=MAX_OUTLINE_NUMBER, what=what)
    except InputError as exc:
        raise OutlineFormError(f"line {line}: {exc}") from None


def _close(chapters: list[dict[str, Any]], body: list[str]) -> None:
    if chapters:
        chapters[-1]["description"] = "\n".join(body).strip()


def to_json(title: str | None, outline: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """The JSON form: ``title`` and ``chapters`` (what ``--file`` reads back) and ``extra`` facts."""
    return {"title": title or "", **extra, "chapters": [{k: c.get(k) for k in FIELDS} for c in outline]}


def parse_json(text: str) -> tuple[str, list[dict[str, Any]]]:
    """The title and chapters of the JSON form (other top-level keys, as ``--json`` prints them, ignored)."""
    try:
        data = loads_json(text, what="the JSON outline")
    except json.JSONDecodeError as exc:
        raise OutlineFormError(f"not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except InputError as exc:
        raise OutlineFormError(str(exc)) from None
    if not isinstance(data, dict) or not isinstance(data.get("chapters"), list):
        raise OutlineFormError("the JSON outline needs an object with a 'chapters' list")
    title = data.get("title", "")
    if not isinstance(title, str):
        raise OutlineFormError("the JSON outline's 'title' must be a string")
    chapters = []
    for n, item in enumerate(data["chapters"], 1):
        if not isinstance(item, dict) or set(item) != set(FIELDS):
            raise OutlineFormError(f"JSON chapter {n} must have exactly the keys {', '.join(FIELDS)}")
        if not all(
            isinstance(item[k], int) and not isinstance(item[k], bool) for k in ("id", "target_words")
        ) or not all(isinstance(item[k], str) for k in ("title", "description")):
            raise OutlineFormError(
                f"JSON chapter {n}: id and target_words must be integers, title and description strings"
            )
        chapters.append({k: item[k] for k in FIELDS})
    return title, chapters


def parse(text: str) -> tuple[str, list[dict[str, Any]]]:
    """Either form: JSON if the text starts with ``{``, else the text form; titles and descriptions
    pass the one label rule (no escape sequences or control characters, bounded length)."""
    title, chapters = parse_json(text) if text.lstrip().startswith("{") else parse_text(text)
    try:
        title = checked_label(title, what="the outline's title", empty_ok=True)
        for c in chapters:
            c["title"] = checked_label(c["title"], what=f"chapter {c['id']}'s title", empty_ok=True)
            c["description"] = checked_text(
                c["description"], what=f"chapter {c['id']}'s description", limit=MAX_DESCRIPTION
            )
    except InputError as exc:
        raise OutlineFormError(str(exc)) from None
    return title, chapters
