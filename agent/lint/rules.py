"""The lint's rules as data: stock phrases (name, pattern, example) and the dialogue-tag word lists.

The defaults live in ``data/stock_phrases.toml``; a writer's own file of the same shape adds rules,
replaces one of the same name, or turns one off with ``enabled = false``. Kept as data so that a rule is
changed without touching code, and every rule carries an example a test matches it against.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from agent.errors import InputError

DEFAULT_RULES = Path(__file__).with_name("data") / "stock_phrases.toml"


@dataclass(frozen=True)
class Rule:
    """One stock phrase: ``pattern`` is matched on the lower-cased text (so case does not matter), a
    space in it matching any run of white space (a manuscript wraps its lines anywhere); ``example`` is a
    sentence it flags. A leading ``\\b`` is checked after the match (``word_start``): the scan is then a
    fast literal search, several times quicker."""

    name: str
    pattern: re.Pattern[str]
    example: str
    word_start: bool = False
    anchor: str = ""
    case: bool = False
    """``case = true`` in the file: matched on the text as written (a name that is also a word: Zephyr)."""
    """Lower-case text every match contains (empty: none known): a chapter without it is skipped."""


@dataclass(frozen=True)
class LintRules:
    """Everything the lint flags by list: the phrase rules and the tag verbs (lower case)."""

    rules: list[Rule]
    nonspeech_tags: frozenset[str] = field(default_factory=frozenset)
    elaborate_tags: frozenset[str] = field(default_factory=frozenset)
    plain_tags: frozenset[str] = field(default_factory=frozenset)


def _read(path: Path) -> dict:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except OSError as exc:
        raise InputError(f"cannot read lint rules {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"lint rules {path} are not valid TOML: {exc}") from exc


def _rule(entry: dict, source: Path) -> Rule | None:
    """A rule from one ``[[rule]]`` table; ``None`` when it is turned off."""
    name = entry.get("name")
    if not isinstance(name, str) or not name:
        raise InputError(f"lint rules {source}: a [[rule]] without a name")
    if entry.get("enabled", True) is False:
        return None
    pattern, example = entry.get("pattern"), entry.get("example", "")
    if not isinstance(pattern, str) or not pattern:
        raise InputError(f"lint rules {source}: rule {name!r} has no pattern")
    case = entry.get("case", False) is True
    word_start = pattern.startswith(r"\b")
    body = pattern[2:] if word_start else pattern
    try:
        compiled = re.compile((body if case else _lower(body)).replace(" ", r"\s+"), re.MULTILINE)
    except re.error as exc:
        raise InputError(f"lint rules {source}: rule {name!r}: bad pattern: {exc}") from exc
    anchor = anchor_of(pattern)
    return Rule(name, compiled, str(example), word_start, anchor if case else anchor.lower(), case)


def _lower(pattern: str) -> str:
    """``pattern`` with its letters lower-cased, escapes (``\\S``, ``\\B``, ``\\W``) kept."""
    return re.sub(r"(\\.)|([A-Z])", lambda m: m.group(1) or m.group(2).lower(), pattern)


def anchor_of(pattern: str) -> str:
    """The longest literal word outside any group of ``pattern``.

    A regular expression that begins with ``\\b`` or a group is slow to scan for; a plain substring test
    on the anchor first skips the chapters it cannot match in (most chapters, for most rules). Empty when
    the pattern has a top-level alternation or no literal run.
    """
    runs, run, depth, i = [], "", 0, 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            runs.append(run)
            run, i = "", i + 2
            continue
        if char in "([":
            runs.append(run)
            run = ""
            if char == "[":
                i = pattern.find("]", i + 2) + 1 or len(pattern)
                continue
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return ""
        elif char in "?*{" and run:
            runs.append(run[:-1])
            run = ""
        elif depth == 0 and (char.isalpha() or char in " ,'"):
            run += char
        else:
            runs.append(run)
            run = ""
        i += 1
    runs.append(run)
    words = [w for r in runs for w in r.replace(",", " ").split()]
    return max(words, key=len) if words else ""


def load_rules(extra: Path | None = None) -> LintRules:
    """The default rules, extended (or overridden, by name) by the writer's file ``extra``."""
    by_name: dict[str, Rule | None] = {}
    tags: dict[str, list[str]] = {}
    for source in (DEFAULT_RULES, *([extra] if extra else [])):
        data = _read(source)
        for entry in data.get("rule", []):
            rule = _rule(entry, source)
            by_name[entry["name"]] = rule
        for key, words in data.get("tags", {}).items():
            tags[key] = [str(w).lower() for w in words]
    return LintRules(
        rules=[r for r in by_name.values() if r is not None],
        nonspeech_tags=frozenset(tags.get("nonspeech", [])),
        elaborate_tags=frozenset(tags.get("elaborate", [])),
        plain_tags=frozenset(tags.get("plain", [])),
    )
