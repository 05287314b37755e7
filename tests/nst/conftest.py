from __future__ import annotations

from typing import Any

import pytest

from agent.nst.config import NST_DEFAULTS
from agent.store import RunStore

PROMPT = "A lighthouse keeper finds a bell that rings for ships that sank a hundred years ago."


@pytest.fixture
def config(tmp_path) -> dict[str, Any]:
    return {
        **NST_DEFAULTS,
        "prompt": PROMPT,
        "prompt_id": None,
        "words": 1200,
        "plan_cache": str(tmp_path / "plans"),
        "llm": {"backend": "scripted", "model": "scripted-author"},
    }


@pytest.fixture
def store(tmp_path, config):
    s = RunStore.create(tmp_path / "run", pipeline="nst", config=config)
    yield s
    s.close()
