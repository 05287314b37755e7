"""``KEY=VALUE``, read one way everywhere: ``--set`` (write, resume, fork, batch), ``fabula edit
--var`` and the world-variable lines of an edited step document.

VALUE is JSON (a number, true/false, null, a list or an object) when it parses as JSON, else
the text as it is. Each caller says how a malformed item is refused (its flag, its line).
"""

from __future__ import annotations

import json
from typing import Any


def split(item: str) -> tuple[str, str] | None:
    """``(key, raw value)`` of ``KEY=VALUE`` (the key stripped); None without ``=`` or a key."""
    key, sep, raw = item.partition("=")
    key = key.strip()
    if not sep or not key:
        return None
    return key, raw


def line_key(line: str) -> str:
    """The key of a ``KEY = VALUE`` line as written (before the first ``=``, without surrounding
    space or double quotes); the whole line stripped when it has no ``=``."""
    return line.partition("=")[0].strip().strip('"')


class MalformedValue(ValueError):
    """A VALUE that starts as JSON does but is not JSON (or is nested beyond parsing)."""


def value(raw: str, *, strip: bool = False) -> Any:
    """The value of ``raw``: its JSON, else the text (``strip``: without surrounding space).

    A VALUE that starts as JSON does (``{``, ``[``, ``"``) must be JSON: ``x={"a":`` is refused,
    not kept as the string it happens to be."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        if raw.lstrip()[:1] in ("{", "[", '"'):
            raise MalformedValue(
                f'{raw[:40]!r} is not valid JSON ({exc.msg}); quote a plain string that starts with {{, [ or "'
            ) from None
        return raw.strip() if strip else raw
    except RecursionError:
        raise MalformedValue("the JSON value is nested too deeply") from None
