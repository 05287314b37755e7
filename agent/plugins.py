"""What fabula's plugin groups share: reading a group's entry points, naming where one comes from,
and saying what went wrong in one line.

Pipelines (``fabula.pipelines``, ``agent.pipelines``) and backends (``fabula.backends``,
``agent.llm.backends``) are both added by other installed packages; one reading of entry points
keeps their order, their origin and their errors alike.
"""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint, entry_points

_WARNED: set[str] = set()


def group_entries(group: str) -> list[EntryPoint]:
    """The entry points of ``group`` in every installed package, in a stable order (name, then value)."""
    return sorted(entry_points(group=group), key=lambda e: (e.name, e.value))


def origin(entry: EntryPoint) -> str:
    """The installed package an entry point comes from: ``name version``."""
    dist = getattr(entry, "dist", None)
    return f"{dist.name} {dist.version}" if dist is not None else "an unnamed package"


def one_line(exc: BaseException) -> str:
    """An exception's message on one line (its lines joined, at most 200 characters), for a one-line error."""
    return " ".join(str(exc).split())[:200]


def warn_once(line: str) -> None:
    """``fabula: warning: LINE`` on stderr, once per process (a listing may be asked for many times)."""
    if line not in _WARNED:
        _WARNED.add(line)
        print(f"fabula: warning: {line}", file=sys.stderr)


def forget_warnings() -> None:
    """Warn again of what was warned of (a test that installs a plugin anew)."""
    _WARNED.clear()
