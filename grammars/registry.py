"""Name → grammar registry, and the JSON Schema export that ``fabula grammars export`` runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from grammars.base import Grammar

G = TypeVar("G", bound=type[Grammar])

_REGISTRY: dict[str, type[Grammar]] = {}


def register(name: str):
    """Class decorator: make a grammar available by ``name`` (e.g. to ``fabula prompt --grammar``)."""

    def decorate(cls: G) -> G:
        if not (isinstance(cls, type) and issubclass(cls, Grammar)):
            raise TypeError(f"{cls!r} must subclass grammars.Grammar")
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"grammar name {name!r} is already taken by {_REGISTRY[name].__name__}")
        _REGISTRY[name] = cls
        return cls

    return decorate


def get_grammar(name: str) -> type[Grammar]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown grammar {name!r}; known: {', '.join(sorted(_REGISTRY)) or 'none'}") from None


def all_grammars() -> dict[str, type[Grammar]]:
    return dict(sorted(_REGISTRY.items()))


def schema_of(name: str) -> dict[str, Any]:
    return get_grammar(name).model_json_schema()


def schema_text(name: str) -> str:
    """The exact text written for a grammar: stable key order, trailing newline."""
    return json.dumps(schema_of(name), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def export_schemas(directory: Path) -> list[Path]:
    """Write ``<name>.schema.json`` for every registered grammar; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name in all_grammars():
        path = directory / f"{name}.schema.json"
        path.write_text(schema_text(name), encoding="utf-8")
        written.append(path)
    return written


def schemas_dir() -> Path:
    """Where the checked-in copies live."""
    return Path(__file__).parent / "schemas"
