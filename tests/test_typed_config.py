"""A run's settings are validated once and handed to the runner typed (issue 32): ``pipelines.start`` takes
the typed settings a command built and runs on that very object, never re-parsing the stored dict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent import pipelines
from agent.nst.config import DirectConfig
from agent.run_context import RunContext
from agent.testing.author import Author


def test_the_typed_settings_a_command_built_are_the_ones_the_runner_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = pipelines.get("direct").settle({"prompt": "A keeper finds a bell.", "words": 300})
    assert isinstance(settings, DirectConfig)
    parsed: list[Any] = []
    original = DirectConfig.parse.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(
        DirectConfig, "parse", classmethod(lambda cls, *a, **k: parsed.append(a) or original(cls, *a, **k))
    )
    seen: list[Any] = []
    enter = RunContext.__enter__
    monkeypatch.setattr(RunContext, "__enter__", lambda self: seen.append(self.config) or enter(self))
    llm = pipelines.LLMOptions(backend="scripted", model="scripted")
    store = pipelines.start(tmp_path / "run", "direct", settings, llm, model=Author())
    assert store.info().status == "completed" and store.info().config["words"] == 300
    assert seen == [settings] and seen[0] is settings and not parsed
