"""Numeric bounds a decoder can enforce: JSON Schema ranges rewritten before compiling.

Outlines compiles an integer range to "any integer", so a reply can be refused after decoding
(measured: docs/design/bounds.md). Two rewrites make the bound part of the grammar itself:

* :func:`enum_bounded` — a small integer range becomes an ``enum`` of its values. Every
  backend that enforces JSON Schema enforces ``enum``, so this travels to any server.
* :func:`decoding_regex` — every range (one-sided, wide, or a ``number`` with a lower bound
  >= 0) becomes a regular expression inside the schema's regex, for backends that take a
  regex (the embedded backend always; a server that accepts ``structured_outputs.regex``).

A rewritten range may admit a subset of the valid values (never a superset): a number's
values between a non-integer bound and the next integer are left out, and exponents are
not offered. The check after decoding still runs against the original schema.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable
from typing import Any

JSON_WHITESPACE = r"[ ]?"
"""Compact JSON for every constrained backend: no free whitespace between tokens, so a small model
cannot loop on spaces."""
ENUM_LIMIT = 256
"""Integer ranges with at most this many values become an ``enum``; wider ones need a regex."""

_SENTINEL = "FABULARANGE{}X"
MAX_DIGITS = 15
"""An open-ended range offers at most this many digits (integer part and fraction each): still
a subset of the valid values, exact in a float64, and a sampled number cannot run on until
``max_tokens`` cuts the reply."""
_FRACTION = rf"(\.[0-9]{{1,{MAX_DIGITS}}})?"


# -- integer ranges as regular expressions -------------------------------------------------
def _same_length(a: str, b: str) -> list[str]:
    """Patterns for the decimal strings from ``a`` to ``b`` (same length, ``a <= b``)."""
    if a == b:
        return [a]
    n = len(a)
    if a[1:] == "0" * (n - 1) and b[1:] == "9" * (n - 1):
        head = a[0] if a[0] == b[0] else f"[{a[0]}-{b[0]}]"
        return [head + ("[0-9]" * (n - 1) if n <= 3 else f"[0-9]{{{n - 1}}}")]
    if a[0] == b[0]:
        return [a[0] + _group(_same_length(a[1:], b[1:]))]
    parts = [a[0] + _group(_same_length(a[1:], "9" * (n - 1)))]
    if int(a[0]) + 1 <= int(b[0]) - 1:
        parts += _same_length(str(int(a[0]) + 1) + "0" * (n - 1), str(int(b[0]) - 1) + "9" * (n - 1))
    parts.append(b[0] + _group(_same_length("0" * (n - 1), b[1:])))
    return parts


def _group(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else "(" + "|".join(parts) + ")"


def _nonnegative(lo: int, hi: int | None) -> list[str]:
    """Patterns for the integers in ``[lo, hi]`` (``hi=None``: no upper bound), ``lo >= 0``."""
    parts: list[str] = []
    top = hi if hi is not None else 10 ** len(str(lo)) - 1
    for digits in range(len(str(lo)), len(str(top)) + 1):
        first = max(lo, 10 ** (digits - 1) if digits > 1 else 0)
        last = min(top, 10**digits - 1)
        if first <= last:
            parts += _same_length(str(first), str(last))
    if hi is None and len(str(lo)) < MAX_DIGITS:
        parts.append(f"[1-9][0-9]{{{len(str(lo))},{MAX_DIGITS - 1}}}")
    return parts


def int_range_regex(lo: int | None, hi: int | None) -> str:
    """A regex matching exactly the JSON integers in ``[lo, hi]`` (``None``: unbounded)."""
    if lo is not None and hi is not None and lo > hi:
        raise ValueError(f"empty integer range [{lo}, {hi}]")
    parts: list[str] = []
    if lo is None or lo < 0:  # the negative side, as -x for x in [max(1, -hi), -lo]
        low_abs = 1 if hi is None or hi >= 0 else -hi
        parts.append("-" + _group(_nonnegative(low_abs, None if lo is None else -lo)))
    if hi is None or hi >= 0:
        parts += _nonnegative(max(lo, 0) if lo is not None else 0, hi)
    return _group(parts)


def number_range_regex(
    lo: float | None, hi: float | None, lo_exclusive: bool = False, hi_exclusive: bool = False
) -> str | None:
    """A regex for JSON numbers in the range, or ``None`` when no sound one is offered.

    Only ranges with a lower bound >= 0 are rewritten (scores, weights, probabilities).
    """
    if lo is None or lo < 0 or not math.isfinite(lo) or (hi is not None and not math.isfinite(hi)):
        return None
    parts: list[str] = []
    first = math.ceil(lo)
    if lo == first and lo_exclusive:
        if hi is None or hi >= lo + 1:
            parts.append(f"{int(lo)}\\.[0-9]*[1-9][0-9]*")  # just above an integer bound
        first += 1
    if hi is None:
        parts.append(int_range_regex(first, None) + _FRACTION)
        return _group(parts)
    whole = math.floor(hi)
    if whole - 1 >= first:
        parts.append(int_range_regex(first, whole - 1) + _FRACTION)
    if whole >= first and not (hi == whole and hi_exclusive):
        parts.append(f"{whole}(\\.0+)?")  # the top integer itself (its fractions may pass hi)
    return _group(parts) if parts else None


# -- schema rewrites --------------------------------------------------------------------------
def _int_bounds(node: dict[str, Any]) -> tuple[int | None, int | None]:
    lo = node.get("minimum")
    hi = node.get("maximum")
    lo = math.ceil(lo) if isinstance(lo, int | float) else None
    hi = math.floor(hi) if isinstance(hi, int | float) else None
    if isinstance(node.get("exclusiveMinimum"), int | float):
        ex = math.floor(node["exclusiveMinimum"]) + 1
        lo = ex if lo is None else max(lo, ex)
    if isinstance(node.get("exclusiveMaximum"), int | float):
        ex = math.ceil(node["exclusiveMaximum"]) - 1
        hi = ex if hi is None else min(hi, ex)
    return lo, hi


_BOUND_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def _is_bounded_number(node: Any) -> bool:
    return (
        isinstance(node, dict)
        and node.get("type") in ("integer", "number")
        and any(k in node for k in _BOUND_KEYS)
        and "enum" not in node
        and "const" not in node
    )


def _walk(node: Any, visit: Callable[[dict[str, Any]], dict[str, Any] | None]) -> Any:
    """Rebuild ``node`` bottom-up, replacing any dict for which ``visit`` returns a value."""
    if isinstance(node, list):
        return [_walk(item, visit) for item in node]
    if not isinstance(node, dict):
        return node
    replaced = visit(node)
    if replaced is not None:
        return replaced
    return {key: _walk(value, visit) for key, value in node.items()}


def enum_bounded(schema: dict[str, Any], limit: int = ENUM_LIMIT) -> dict[str, Any]:
    """``schema`` with every integer range of at most ``limit`` values turned into an ``enum``."""

    def visit(node: dict[str, Any]) -> dict[str, Any] | None:
        if not _is_bounded_number(node) or node["type"] != "integer":
            return None
        lo, hi = _int_bounds(node)
        if lo is None or hi is None or hi - lo + 1 > limit or hi < lo:
            return None
        rest = {k: v for k, v in node.items() if k not in _BOUND_KEYS}
        return {**rest, "enum": list(range(lo, hi + 1))}

    return _walk(copy.deepcopy(schema), visit)


def unenforced_bounds(schema: dict[str, Any], limit: int = ENUM_LIMIT) -> int:
    """How many numeric ranges :func:`enum_bounded` leaves for the decoder to ignore."""
    count = 0

    def visit(node: dict[str, Any]) -> dict[str, Any] | None:
        nonlocal count
        count += _is_bounded_number(node)
        return None

    _walk(enum_bounded(schema, limit), visit)
    return count


def _range_regex(node: dict[str, Any]) -> str | None:
    if node["type"] == "integer":
        lo, hi = _int_bounds(node)
        return int_range_regex(lo, hi) if lo is None or hi is None or lo <= hi else None
    lo_ex = isinstance(node.get("exclusiveMinimum"), int | float)
    hi_ex = isinstance(node.get("exclusiveMaximum"), int | float)
    lo = node["exclusiveMinimum"] if lo_ex else node.get("minimum")
    hi = node["exclusiveMaximum"] if hi_ex else node.get("maximum")
    return number_range_regex(lo, hi, lo_ex, hi_ex)


def _verbatim(text: str) -> Callable[[re.Match[str]], str]:
    """A replacement for :func:`re.sub` that puts ``text`` in as it is (its backslashes are no escapes)."""
    return lambda _match: text


def decoding_regex(schema: dict[str, Any], build_regex_from_schema: Callable[[str, str], str], whitespace: str) -> str:
    """The schema's regex (by Outlines' ``build_regex_from_schema``) with every numeric range
    it would ignore spliced in: each bounded node is compiled as a placeholder string, then
    the placeholder is replaced by the range's own regex."""
    ranges: dict[str, str] = {}

    def visit(node: dict[str, Any]) -> dict[str, Any] | None:
        if not _is_bounded_number(node):
            return None
        pattern = _range_regex(node)
        if pattern is None:
            return None
        sentinel = _SENTINEL.format(len(ranges))
        ranges[sentinel] = pattern
        return {"const": sentinel}

    rewritten = _walk(copy.deepcopy(schema), visit)
    regex = build_regex_from_schema(json.dumps(rewritten), whitespace)
    for sentinel, pattern in ranges.items():
        quoted = re.escape(f'"{sentinel}"')
        if f'"{sentinel}"' in regex:
            regex = regex.replace(f'"{sentinel}"', f"({pattern})")
        elif re.search(quoted, regex):
            regex = re.sub(quoted, _verbatim(f"({pattern})"), regex)
        else:
            raise ValueError(f"could not place the numeric range {pattern!r} in the compiled schema")
    return regex
