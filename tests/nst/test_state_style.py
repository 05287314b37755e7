"""``state_style`` "reference" (the paper profile): a character entry is ``{name, description}`` and the state is
shown as one indented JSON object with ids and chapter numbers, as the NstAgent reference does
(agent_core.py:1625 ``NARRATIVE_OPS_UPDATE_TOOL``, :3514); the default keeps fabula's typed snapshots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent.nst.chapter.tools import update_grammar
from agent.nst.config import NstConfig
from agent.nst.state import NarrativeState
from agent.testing.author import Author
from tests.nst.profile_runs import written


def _character_item(model: Any) -> dict[str, Any]:
    schema = model.model_json_schema()
    ref = schema["properties"]["upsert_character_state"]["items"]["$ref"].rsplit("/", 1)[1]
    return schema["$defs"][ref]


def test_the_reference_character_entry_is_a_name_and_a_description() -> None:
    plain = _character_item(update_grammar((), evidence=False, notes=True))
    assert set(plain["properties"]) == {"name", "description"} and set(plain["required"]) == {"name", "description"}
    quoted = _character_item(update_grammar((), evidence=True, notes=True))
    assert set(quoted["properties"]) == {"name", "description", "evidence"}
    typed = _character_item(update_grammar((), evidence=False))
    assert {"location", "goal", "facts"} <= set(typed["properties"])


def test_a_note_replaces_the_character_and_the_state_renders_as_the_references_json() -> None:
    grammar = update_grammar((), evidence=False, notes=True)
    first = grammar.model_validate(
        {
            "tool": "update",
            "upsert_character_state": [{"name": "Ada", "description": "At the pier, wants the bell."}],
            "add_past_event": [{"key": "bell_found", "description": "Ada found the bell."}],
            "add_future_requirement": [{"key": "bell_rings", "description": "The bell must ring."}],
            "resolve_future_requirement": [],
        }
    )
    state = NarrativeState().apply(first, chapter=1).state
    assert state.characters == {"Ada": {"description": "At the pier, wants the bell."}}
    later = grammar.model_validate(
        {
            "tool": "update",
            "upsert_character_state": [{"name": "ada", "description": "In the tower, holding the bell."}],
            "add_past_event": [{"key": "tower_climb", "description": "Ada climbed the tower."}],
            "add_future_requirement": [],
            "resolve_future_requirement": [],
        }
    )
    state = state.apply(later, chapter=2).state
    shown = json.loads(state.render("reference"))
    assert list(shown) == ["character_states", "past_events", "future_requirements"]
    assert shown["character_states"] == [{"id": 1, "name": "ada", "description": "In the tower, holding the bell."}]
    assert [(e["id"], e["key"], e["chapter_id"]) for e in shown["past_events"]] == [
        (1, "bell_found", 1),
        (2, "tower_climb", 2),
    ]
    assert shown["future_requirements"] == [
        {"id": 1, "key": "bell_rings", "description": "The bell must ring.", "introduced_chapter_id": 1}
    ]
    assert state.render() == state.render("fabula") and state.render().startswith("Past events")


def _run(tmp_path: Path, profile: str) -> Any:
    author = Author()
    return written(tmp_path / profile, "nst", NstConfig, author, profile), author


def test_a_paper_run_asks_for_notes_and_shows_the_state_as_json(tmp_path: Path) -> None:
    store, author = _run(tmp_path, "paper")
    assert store.info().status == "completed"
    last = [r for r in author.requests if r.role == "nst_turn"][-1].messages
    assert "identity facts" not in last[0]["content"] and "{name, description}" in last[1]["content"]
    section = last[1]["content"].split("# Narrative state now\n")[1].split("\n\n# ")[0]
    assert set(json.loads(section)) == {"character_states", "past_events", "future_requirements"}
    final = store.state()["narrative"]["characters"]
    assert final and all(set(entry) == {"description"} for entry in final.values())
    _, author = _run(tmp_path, "default")
    last = [r for r in author.requests if r.role == "nst_turn"][-1].messages
    assert "identity facts" in last[0]["content"] and "Past events (in the order" in last[1]["content"]
