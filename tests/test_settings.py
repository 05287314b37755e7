"""Typed settings: one override syntax, every value range-checked before anything is stored."""

from __future__ import annotations

import pytest

from agent import pipelines
from agent.cli import main
from agent.errors import ConfigError
from agent.magnet.settings import MagnetSettings
from agent.nst.config import NstConfig
from agent.nst.plan.planner import outline_schema, target_choices
from agent.settings import parse_assignments
from agent.store import RunStore
from agent.testing.story_llm import StoryLLM

STORY = "agent/magnet/examples/mystery_codicil.toml"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("shift_every=0", "setting shift_every for magnet: must be >= 1 (got 0)"),
        ("history_window=0", "setting history_window for magnet: must be >= 1 (got 0)"),
        ("narrator_temperature=-1", "narrator_temperature"),
        ("critic=maybe", "setting critic for magnet"),
        ("bogus=1", "unknown setting 'bogus' for magnet"),
    ],
)
def test_bad_magnet_settings_are_one_line_and_create_nothing(tmp_path, capsys, setting, message):
    out = tmp_path / "run"
    assert main(["write", "magnet", STORY, "--set", setting, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fabula: error: ") and message in err[0], err
    assert not out.exists()


def test_setting_is_an_alias_of_set(tmp_path, monkeypatch):
    llm = StoryLLM()
    monkeypatch.setattr(pipelines.LLMOptions, "open", lambda self, store=None, **kw: llm)
    assert (
        main(
            [
                "write",
                "magnet",
                STORY,
                "--words",
                "150",
                "--setting",
                "narrator_temperature=0.5",
                "--set",
                "max_revisions=1",
                "--out",
                str(tmp_path / "run"),
            ]
        )
        == 0
    )
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        config = store.info().config
    assert config["narrator_temperature"] == 0.5 and config["max_revisions"] == 1
    assert {r.temperature for r in llm.by_role("narrator")} == {0.5}


@pytest.mark.parametrize(
    "setting", ["max_turns=2", "read_budget=-1", "gate_low=1.5", "words=-5", 'words={"a":1}', "temperature=nan"]
)
def test_bad_nst_settings_are_refused(tmp_path, capsys, setting):
    out = tmp_path / "run"
    code = main(["write", "nst", "--prompt", "x", "--words", "1000", "--set", setting, "--out", str(out), "--quiet"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "setting" in err[0] and not out.exists(), err


def test_resume_set_is_validated_before_anything_is_stored(tmp_path, capsys):
    from agent.magnet.definition import load_definition
    from agent.magnet.settings import MagnetConfig

    run = tmp_path / "run"
    config = {
        **MagnetConfig(story=load_definition(STORY).to_dict()).stored(),
        "pipeline_version": "1",
        "llm": {"backend": "embedded", "model": None, "thinking": "off"},
    }
    RunStore.create(run, pipeline="magnet", config=config, unit_kind="step").close()
    with RunStore.open(run, readonly=True) as store:
        before = store.info().config
    assert main(["resume", str(run), "--force", "--set", "shift_every=0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "shift_every" in err[0]
    with RunStore.open(run, readonly=True) as store:
        assert store.info().config == before
        assert store.info().last_unit == 0 and not store.ledger.llm_calls()


def test_an_invalid_stored_value_is_repaired_by_resume_set(tmp_path):
    """A run whose stored config is invalid (written by hand or an older fabula) can be repaired."""
    from tests.nst.conftest import PROMPT

    config = {
        **NstConfig(prompt=PROMPT, words=1000).stored(),
        "read_budget": -3,
        "llm": {"backend": "scripted", "model": "m", "thinking": "off"},
        "pipeline_version": "1",
    }
    RunStore.create(tmp_path / "run", pipeline="nst", config=config).close()
    with RunStore.open(tmp_path / "run") as store:
        with pytest.raises(ConfigError, match="read_budget"):
            pipelines.plan_resume(store)
        plan = pipelines.plan_resume(store, overrides={"read_budget": 3})
    assert plan.config["read_budget"] == 3


def test_gate_setting_reaches_the_planner():
    wide = target_choices(10_000, 10)
    narrow = target_choices(10_000, 10, 0.95, 1.05)
    assert min(wide) < 900 and min(narrow) >= 950 and max(narrow) <= 1050
    schema = outline_schema(10_000, 10, 0.95, 1.05).schema
    assert all(
        item["properties"]["target_words"]["enum"] == narrow for item in schema["properties"]["chapters"]["prefixItems"]
    )


def test_assignments_parse_json_else_string():
    assert parse_assignments(["a=1", "b=true", "c=x y", "d=[1,2]"]) == {"a": 1, "b": True, "c": "x y", "d": [1, 2]}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        parse_assignments(["novalue"])


def test_settings_are_frozen_and_typed():
    settings = MagnetSettings()
    with pytest.raises(ValueError):
        settings.shift_every = 2  # type: ignore[misc]
    assert MagnetSettings.from_config({"shift_every": 5, "story": {}}).shift_every == 5
