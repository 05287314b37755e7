"""Reading a story bible from TOML, YAML or Markdown into one shape, naming every problem with its line.

The one shape (also the JSON Schema's, ``grammars/schemas/story_bible.json``)::

    {"characters": [{"name", "description", "facts": {key: value}}], "places": [{"name", "description"}],
     "rules": [text], "timeline": [{"key", "event", "date"?}], "must_happen": [{"key", "description"}]}

Markdown: ``#`` headings name the sections (any case; "Must happen", "Requirements"), ``##`` a name
followed by its description; "Facts: a; b" in a description lists canon facts; ``- item`` lines list
rules, events and requirements (keys are made from their words). In TOML and YAML a requirement or
event written as a table needs its ``key``. Every problem is collected (never only the first) as
``(line, message)``; a bible with any problem is refused whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.text import InputTooLargeError, read_capped

MAX_BIBLE_BYTES = 1 << 20
"""A story bible is at most 1 MiB (a long one is a few hundred KB)."""
SECTIONS = {
    "characters": "characters",
    "cast": "characters",
    "places": "places",
    "locations": "places",
    "setting": "places",
    "rules": "rules",
    "world rules": "rules",
    "world": "rules",
    "timeline": "timeline",
    "history": "timeline",
    "past events": "timeline",
    "must happen": "must_happen",
    "must-happen": "must_happen",
    "requirements": "must_happen",
    "must_happen": "must_happen",
}
"""Section names a bible may use (case-insensitive) -> the shape's key."""
KEY = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
DATE = re.compile(r"^-?\d{1,4}(-\d{2}(-\d{2})?)?$")
_DATED = re.compile(r"^(\S*\d\S*)\s*:\s+(.+)$")
_FACTS = re.compile(r"(?:^|\s)Facts?:\s*(.+?)\s*$", re.IGNORECASE | re.DOTALL)


class BibleError(ValueError):
    """A bible with problems; ``problems`` holds each as ``(line, message)`` (line 0: the whole file)."""

    def __init__(self, path: str, problems: list[tuple[int, str]]) -> None:
        self.path, self.problems = path, problems
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        return [
            f"{self.path}:{line}: {message}" if line else f"{self.path}: {message}" for line, message in self.problems
        ]


@dataclass
class _Found:
    """The shape being built, each entry with its line."""

    data: dict[str, list[Any]] = field(
        default_factory=lambda: {k: [] for k in ("characters", "places", "rules", "timeline", "must_happen")}
    )
    lines: dict[tuple[str, int], int] = field(default_factory=dict)
    problems: list[tuple[int, str]] = field(default_factory=list)

    def add(self, section: str, entry: Any, line: int) -> None:
        self.lines[(section, len(self.data[section]))] = line
        self.data[section].append(entry)


def read_bible(path: str | Path) -> dict[str, Any]:
    """The bible at ``path`` in the one shape; :class:`BibleError` naming every problem with its line."""
    name = str(path)
    try:
        raw = read_capped(path, MAX_BIBLE_BYTES)
    except InputTooLargeError as exc:
        raise BibleError(name, [(0, f"the file is {exc}")]) from None
    except OSError as exc:
        raise BibleError(name, [(0, f"cannot read it: {exc.strerror or exc}")]) from None
    if b"\x00" in raw:
        raise BibleError(name, [(0, "is a binary file, not a story bible (TOML, YAML or Markdown)")])
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BibleError(name, [(0, f"is not UTF-8 text (byte {exc.start}); save it as UTF-8")]) from None
    suffix = Path(name).suffix.lower()
    found = _toml(text) if suffix == ".toml" else _yaml(text) if suffix in (".yaml", ".yml") else _markdown(text)
    _validate(found, text)
    if found.problems:
        raise BibleError(name, sorted(found.problems))
    return found.data


def slug(text: str, words: int = 6) -> str:
    """A lower_snake_case key from the first ``words`` words of ``text`` (letters kept, CJK too)."""
    parts = re.findall(r"[^\W_]+", text.lower())[:words]
    key = "_".join(parts)
    if not key or not key[0].isalpha() or not key.isascii():
        key = "item_" + "".join(f"{ord(c):x}" for c in text[:4]) if not key.isascii() else "item_" + key
    return key[:64]


def _unique(key: str, section: list[Any]) -> str:
    """A key made from words, with ``_2``, ``_3``... when an earlier item of the section made the same one
    (keys written by the writer are never changed: a repeated one is a problem)."""
    taken = {entry.get("key") for entry in section}
    if key not in taken:
        return key
    n = 2
    while f"{key[:60]}_{n}" in taken:
        n += 1
    return f"{key[:60]}_{n}"


def _markdown(text: str) -> _Found:
    found = _Found()
    section: str | None = None
    current: dict[str, Any] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        heading = re.match(r"^(#{1,6})\s*(.+?)\s*#*$", stripped)
        if heading and len(heading.group(1)) == 1:
            title = heading.group(2).strip().lower()
            section = SECTIONS.get(title)
            current = None
            if section is None:
                found.problems.append(
                    (
                        number,
                        f"unknown section {heading.group(2)!r}; use Characters, Places, Rules, Timeline or Must happen",
                    )
                )
            continue
        if section is None:
            if heading is None:
                found.problems.append((number, "text before the first section heading (# Characters, ...)"))
            continue
        if heading:
            if section not in ("characters", "places"):
                found.problems.append((number, f"a named entry (##) belongs under Characters or Places, not {section}"))
                continue
            current = {"name": heading.group(2).strip(), "description": ""}
            if section == "characters":
                current["facts"] = {}
            found.add(section, current, number)
            continue
        item = re.match(r"^[-*+]\s+(.+)$", stripped)
        if section in ("characters", "places"):
            if current is None:
                found.problems.append((number, f"text under {section} before a ## name line"))
                continue
            current["description"] = f"{current['description']} {stripped}".strip()
            continue
        body = item.group(1).strip() if item else stripped
        if section == "rules":
            found.add("rules", body, number)
        elif section == "timeline":
            dated = _DATED.match(body)
            entry = {"key": _unique(slug(body), found.data["timeline"]), "event": body}
            if dated and re.match(r"^\d", dated.group(1)):
                entry = {
                    "key": _unique(slug(dated.group(2)), found.data["timeline"]),
                    "event": dated.group(2),
                    "date": dated.group(1),
                }
            found.add("timeline", entry, number)
        else:
            found.add(
                "must_happen", {"key": _unique(slug(body), found.data["must_happen"]), "description": body}, number
            )
    for entry in found.data["characters"]:
        facts = _FACTS.search(entry["description"])
        if facts:
            entry["description"] = entry["description"][: facts.start()].strip()
            for fact in (f.strip().rstrip(".") for f in re.split(r";", facts.group(1))):
                if fact:
                    key, _, value = fact.partition(":") if ":" in fact else (slug(fact, 4), "", fact)
                    entry["facts"][slug(key, 4)] = value.strip() or fact
    return found


def _yaml(text: str) -> _Found:
    import yaml

    found = _Found()
    try:
        node = yaml.compose(text, Loader=yaml.BaseLoader)
        data = yaml.load(text, Loader=yaml.BaseLoader)  # every scalar a string: a bad date is ours to name
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        found.problems.append((mark.line + 1 if mark else 0, f"not valid YAML: {getattr(exc, 'problem', exc)}"))
        return found
    lines: dict[int, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(value_node, yaml.SequenceNode):
                for i, item in enumerate(value_node.value):
                    lines[hash((key_node.value, i))] = item.start_mark.line + 1
    _from_mapping(found, data, lambda section, i, _v: lines.get(hash((section, i)), 0))
    return found


def _toml(text: str) -> _Found:
    import tomllib

    found = _Found()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"line (\d+)", str(exc))
        found.problems.append((int(match.group(1)) if match else 0, f"not valid TOML: {exc}"))
        return found
    raw_lines = text.splitlines()

    def line_of(_section: str, _i: int, value: Any) -> int:
        probe = (
            value
            if isinstance(value, str)
            else next((str(v) for v in (value or {}).values() if isinstance(v, str)), "")
            if isinstance(value, dict)
            else ""
        )
        for number, line in enumerate(raw_lines, start=1):
            if probe and probe in line:
                return number
        return 0

    _from_mapping(found, data, line_of)
    return found


def _from_mapping(found: _Found, data: Any, line_of: Any) -> None:
    if not isinstance(data, dict):
        found.problems.append((1, "a bible is a table of sections (characters, places, rules, timeline, must_happen)"))
        return
    for title, values in data.items():
        section = SECTIONS.get(str(title).strip().lower())
        if section is None:
            found.problems.append((line_of(title, 0, str(title)), f"unknown section {title!r}"))
            continue
        if not isinstance(values, list):
            found.problems.append((line_of(title, 0, str(title)), f"{title} must be a list"))
            continue
        for i, value in enumerate(values):
            line = line_of(str(title), i, value)
            entry = _entry(section, value, line, found)
            if entry is not None:
                found.add(section, entry, line)


def _entry(section: str, value: Any, line: int, found: _Found) -> Any:
    if section == "rules":
        if not isinstance(value, str):
            found.problems.append((line, "a rule is a line of text"))
            return None
        return value
    if isinstance(value, str):
        if section == "must_happen":
            return {"key": slug(value), "description": value}
        if section == "timeline":
            return {"key": slug(value), "event": value}
        return {"name": value, "description": "", **({"facts": {}} if section == "characters" else {})}
    if not isinstance(value, dict):
        found.problems.append((line, f"an entry of {section} is a table or a line of text"))
        return None
    if section in ("characters", "places"):
        facts = value.get("facts") or {}
        if isinstance(facts, list):
            facts = {slug(str(f), 4): str(f) for f in facts}
        entry: dict[str, Any] = {
            "name": str(value.get("name") or "").strip(),
            "description": str(value.get("description") or ""),
        }
        if section == "characters":
            entry["facts"] = {str(k): str(v) for k, v in facts.items()} if isinstance(facts, dict) else {}
        return entry
    text_field = "description" if section == "must_happen" else "event"
    entry = {"key": value.get("key"), text_field: str(value.get(text_field) or value.get("description") or "")}
    if section == "timeline" and value.get("date") is not None:
        entry["date"] = str(value["date"])
    return entry


def _validate(found: _Found, text: str) -> None:
    data = found.data
    for section in ("characters", "places"):
        seen: dict[str, int] = {}
        for i, entry in enumerate(data[section]):
            line = found.lines.get((section, i), 0)
            name = entry.get("name", "")
            if not name:
                found.problems.append((line, f"an entry of {section} has no name"))
                continue
            if name.casefold() in seen:
                what = "character" if section == "characters" else "place"
                first = seen[name.casefold()]
                found.problems.append((line, f"the {what} {name!r} appears twice (first at line {first})"))
            seen.setdefault(name.casefold(), line)
            for key in entry.get("facts", {}):
                if KEY.fullmatch(key) is None:
                    found.problems.append((line, f"{name}: fact key {key!r} must be lower_snake_case"))
    for section, what in (("timeline", "event"), ("must_happen", "requirement")):
        keys: dict[str, int] = {}
        for i, entry in enumerate(data[section]):
            line = found.lines.get((section, i), 0)
            key = entry.get("key")
            if not key:
                found.problems.append((line, f'a {what} has no key (give key = "lower_snake_case")'))
                continue
            if not isinstance(key, str) or KEY.fullmatch(key) is None:
                found.problems.append((line, f"the {what} key {key!r} must be lower_snake_case"))
                continue
            if key in keys:
                found.problems.append((line, f"the {what} key {key!r} appears twice (first at line {keys[key]})"))
            keys.setdefault(key, line)
            body = entry.get("description" if section == "must_happen" else "event")
            if not body:
                found.problems.append((line, f"the {what} {key!r} has no text"))
            date = entry.get("date")
            if date is not None and not _is_date(date):
                found.problems.append(
                    (line, f"the date {date!r} of {key!r} is not a date (YYYY, YYYY-MM or YYYY-MM-DD)")
                )
    if not any(data.values()):
        found.problems.append(
            (0, "the bible is empty: give at least one of Characters, Places, Rules, Timeline, Must happen")
        )


def _is_date(value: str) -> bool:
    import datetime

    value = value.strip()
    if not DATE.fullmatch(value):
        return False
    parts = value.lstrip("-").split("-")
    if len(parts) == 1:
        return True
    try:
        datetime.date(int(parts[0]) or 1, int(parts[1]), int(parts[2]) if len(parts) > 2 else 1)
    except ValueError:
        return False
    return True
