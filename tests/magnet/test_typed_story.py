"""Magnet's story definition is a typed field of its settings: every parse checks it (a bad one is
one line and leaves nothing behind) and the runner gets a StoryDefinition; the stored
configuration keeps the story as it was given, so a run written before a field was added opens
and resumes with an unchanged configuration."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agent import pipelines
from agent.errors import ConfigError
from agent.magnet.definition import StoryDefinition
from agent.magnet.settings import MagnetConfig, SingleConfig
from agent.store import config_changes
from tests.magnet.stories import story

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_d73c811"


@pytest.mark.parametrize("cls", [MagnetConfig, SingleConfig])
def test_the_story_is_typed_and_checked_on_every_parse(cls):
    parsed = cls.parse({"story": story(words=600).to_dict()})
    assert isinstance(parsed.story, StoryDefinition) and parsed.story.target_words == 600
    with pytest.raises(ConfigError, match="story"):
        cls.parse({"story": {"title": "no characters"}})


@pytest.mark.parametrize("name", ["magnet", "single"])
def test_a_bad_story_is_refused_before_the_run_is_created(tmp_path, name):
    with pytest.raises(ConfigError, match="story"):
        pipelines.start(
            tmp_path / "run", name, {"story": {"title": "x", "genre": "y"}}, pipelines.LLMOptions(backend="scripted")
        )
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", ["magnet", "single"])
def test_an_old_runs_story_is_stored_as_it_was(name):
    with sqlite3.connect(LEGACY / name / "run.db") as db:
        stored = json.loads(db.execute("SELECT config FROM run").fetchone()[0])
    rebuilt = pipelines.get(name).configure(
        {k: v for k, v in stored.items() if k not in ("pipeline_version", "llm")}, pipelines.LLMOptions()
    )
    assert rebuilt["story"] == stored["story"]
    assert not [c for c in config_changes(stored, rebuilt) if c.describe().startswith("story")]
