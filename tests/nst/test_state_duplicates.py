"""An update that names one character twice is refused whole (found by scripts/mutants.py)."""

from __future__ import annotations

import pytest

from agent.nst.state import NarrativeState, UpdateError
from tests.nst.test_state import upd


def test_the_same_character_twice_in_one_update_is_an_error():
    with pytest.raises(UpdateError, match="'mara' appears twice in this update"):
        NarrativeState().apply(upd([("Mara", {"goal": "stay"}), ("mara", {"goal": "leave"})]))
