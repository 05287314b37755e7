"""``KEY=VALUE`` is read one way (``agent.keyvalue``): ``--set``, ``fork --set``, ``edit --var`` and the
world-variable lines of an edited step give the same values and refuse a malformed item the
same way; no other module partitions on ``=`` itself (checked with ``ast``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agent.errors import ConfigError
from agent.settings import parse_assignments
from agent.store.writer.edit import VARIABLES_HEADER, parse_step_document

ROOT = Path(__file__).resolve().parents[1]


def test_only_keyvalue_splits_assignments():
    found = []
    for path in sorted((ROOT / "agent").rglob("*.py")):
        if path.name == "keyvalue.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "partition"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value == "="
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, "use agent.keyvalue:\n" + "\n".join(found)


def test_every_reader_gives_the_same_values():
    items = ["a=1", "b=true", "c=[1, 2]", "d=text", " e =null"]
    assert parse_assignments(items) == {"a": 1, "b": True, "c": [1, 2], "d": "text", "e": None}
    document = "A paragraph.\n\n" + VARIABLES_HEADER + "\n" + "\n".join(items) + "\n"
    assert parse_step_document(document)[1] == {"a": 1, "b": True, "c": [1, 2], "d": "text", "e": None}
    with pytest.raises(ConfigError, match="--var needs KEY=VALUE, got '=1'"):
        parse_assignments(["=1"], flag="--var")
