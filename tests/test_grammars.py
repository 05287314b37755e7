"""Every grammar is closed, and the checked-in JSON Schemas match the pydantic models."""

from __future__ import annotations

import json

import pytest

from agent.cli import main
from grammars import all_grammars, get_grammar
from grammars.registry import schema_text, schemas_dir


def _objects(schema: dict):
    """Every object schema inside ``schema``, $defs included."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if node.get("type") == "object" or "properties" in node:
                yield node
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


@pytest.mark.parametrize("name", list(all_grammars()))
def test_every_object_forbids_additional_properties(name):
    objects = list(_objects(get_grammar(name).model_json_schema()))
    assert objects
    for obj in objects:
        assert obj.get("additionalProperties") is False, f"{name}: {obj.get('title')} is open"


@pytest.mark.parametrize("name", list(all_grammars()))
def test_exported_schema_is_in_sync(name):
    path = schemas_dir() / f"{name}.schema.json"
    assert path.exists(), f"run: fabula grammars export grammars/schemas ({path} missing)"
    assert path.read_text(encoding="utf-8") == schema_text(name), (
        f"{path} is stale: run 'fabula grammars export grammars/schemas'"
    )


def test_no_stale_exported_schemas():
    names = {p.name.removesuffix(".schema.json") for p in schemas_dir().glob("*.schema.json")}
    assert names == set(all_grammars())


def test_export_command_writes_every_schema(tmp_path, capsys):
    assert main(["grammars", "export", str(tmp_path / "out")]) == 0
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == sorted(f"{n}.schema.json" for n in all_grammars())
    schema = json.loads((tmp_path / "out" / "character_sheet.schema.json").read_text())
    assert schema["title"] == "CharacterSheet"


def test_unknown_grammar_is_a_key_error_naming_the_known_ones():
    with pytest.raises(KeyError, match="character_sheet"):
        get_grammar("nope")
