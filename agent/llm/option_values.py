"""The rules a model option's value follows, each written once and used wherever the value is read.

A rule turns what a flag, an environment variable or the config file gave into the typed value
(``read``) or raises :class:`BadValue` saying what it must be; each reader puts its own prefix
(the flag, the variable, the file and key) before that sentence. One rule per value means one
range: the call timeout's bound cannot differ between the flag, the environment and the file.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from agent import keyvalue

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class BadValue(ValueError):
    """A value an option does not take; the message reads ``must be ..., got ...``."""


@dataclass(frozen=True)
class Text:
    """Any string, taken as it is (the config file checks it is one clean line)."""

    kind = str

    def read(self, value: Any) -> Any:
        return value


@dataclass(frozen=True)
class OneOf:
    """One of a fixed set of names."""

    choices: tuple[str, ...]
    kind = str

    def read(self, value: Any) -> Any:
        if value not in self.choices:
            raise BadValue(f"must be one of {', '.join(self.choices)}, got {value!r}")
        return value


@dataclass(frozen=True)
class Positive:
    """A finite number above 0 and at most ``most``; ``unit`` names what it counts (``seconds``)."""

    most: float = math.inf
    unit: str | None = None
    kind = float

    def read(self, value: Any) -> float:
        number = _number(value, f"a number of {self.unit}" if self.unit else "a number")
        if isinstance(value, bool) or not math.isfinite(number) or not 0 < number <= self.most:
            span = (
                f"between 0 and {self.most:.0f}" + (f" {self.unit}" if self.unit else "")
                if math.isfinite(self.most)
                else "a positive number"
            )
            raise BadValue(f"must be {span}, got {value!r}")
        return number


@dataclass(frozen=True)
class Switch:
    """On or off: a boolean, or its spelling as text (1/0, true/false, yes/no, on/off)."""

    kind = bool

    def read(self, value: Any) -> bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE + _FALSE:
            return text in _TRUE
        raise BadValue(f"must be true or false (1/0, yes/no), got {value!r}")


@dataclass(frozen=True)
class RoleAssignments:
    """``ROLE=VALUE`` pairs: a flag's one, or the config file's ``ROLE=VALUE, ROLE=VALUE``, read into
    that text written the one way (:func:`role_pairs` gives them by role). A role is a lower-case
    name; which roles a pipeline has is checked where the pipeline is known (``agent.llm.options``)."""

    what: str = "MODEL"
    urls: bool = False
    """Each value is a server's base URL (checked as every server URL is before a request)."""
    kind = str

    def read(self, value: Any) -> str:
        pairs: dict[str, str] = {}
        for part in str(value).split(","):
            found = keyvalue.split(part.strip())  # the one KEY=VALUE reading
            role, given = (found[0], found[1].strip()) if found is not None else ("", "")
            if not given or not _ROLE.fullmatch(role):
                raise BadValue(f"must be ROLE={self.what} (e.g. critic={self.what}), got {part.strip()!r}")
            if self.urls:
                from agent.llm.http import normalize_base_url

                try:
                    normalize_base_url(given)
                except ValueError as exc:
                    raise BadValue(f"must be ROLE=URL with a server's base URL, got {role}=...: {exc}") from None
            pairs[role] = given
        return ", ".join(f"{role}={given}" for role, given in pairs.items())


def role_pairs(text: str | None) -> dict[str, str]:
    """The pairs of a text :class:`RoleAssignments` read, by role (the last of a role winning)."""
    pairs = (keyvalue.split(part) for part in (text or "").split(", ") if part)
    return {found[0]: found[1] for found in pairs if found is not None}


_ROLE = re.compile(r"[a-z][a-z0-9_-]{0,39}")
ValueRule = Text | OneOf | Positive | Switch | RoleAssignments
TEXT = Text()
"""The rule of a plain string option (most of them)."""


def _number(value: Any, what: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise BadValue(f"must be {what}, got {value!r}") from None
