"""Config fingerprints and diffs: what makes a resumed run the same run."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

_UNSET = object()


def canonical_json(value: Any) -> str:
    """One spelling per value: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def fingerprint(config: dict[str, Any]) -> str:
    """SHA-256 of the canonical JSON of ``config``."""
    return hashlib.sha256(canonical_json(config).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Change:
    """One key whose value differs (``None`` stands for absent on that side)."""

    key: str
    old: Any
    new: Any
    old_set: bool = True
    new_set: bool = True

    def describe(self) -> str:
        old = json.dumps(self.old, ensure_ascii=False) if self.old_set else "unset"
        new = json.dumps(self.new, ensure_ascii=False) if self.new_set else "unset"
        return f"{self.key}: {old} -> {new}"


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value


def config_changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """Changed, added and removed keys, nested dicts as dotted paths, sorted by key."""
    flat_old: dict[str, Any] = {}
    flat_new: dict[str, Any] = {}
    _flatten(old, "", flat_old)
    _flatten(new, "", flat_new)
    changes = []
    for key in sorted(set(flat_old) | set(flat_new)):
        a = flat_old.get(key, _UNSET)
        b = flat_new.get(key, _UNSET)
        if a is _UNSET or b is _UNSET or canonical_json(a) != canonical_json(b):
            changes.append(
                Change(key, None if a is _UNSET else a, None if b is _UNSET else b, a is not _UNSET, b is not _UNSET)
            )
    return changes
