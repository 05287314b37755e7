"""An update that names one character twice refuses the repeat, by name (found by scripts/mutants.py).

Since #13 an update applies per entry: the first snapshot of the character applies, the second
is refused with its reason, and the model is told which entry failed."""

from __future__ import annotations

from agent.nst.state import NarrativeState
from tests.nst.test_state import upd


def test_the_same_character_twice_in_one_update_is_refused_by_name():
    result = NarrativeState().apply(upd([("Mara", {"goal": "stay"}), ("mara", {"goal": "leave"})]))
    assert any("'mara': appears twice in this update" in reason for reason in result.refused), result.refused
    assert list(result.state.characters) == ["Mara"] and result.state.characters["Mara"]["goal"] == "stay"
