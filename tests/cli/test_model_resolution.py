"""Every command that talks to a model resolves it the same way: flags, then environment, then default.

Regression for the bug where ``FABULA_ENDPOINT`` was honoured by ``write nst`` but ignored by
``write magnet`` and ``write single``, which then wrote with the embedded 135M model.
"""

from __future__ import annotations

import pytest

from agent import pipelines
from agent.cli import main
from agent.testing.server import models_server

STORY = "agent/magnet/examples/mystery_codicil.toml"


@pytest.fixture
def captured(monkeypatch):
    seen: dict = {}

    def fake_start(run_dir, name, config, llm, **kwargs):
        seen.update(run_dir=run_dir, name=name, llm=llm)
        raise KeyboardInterrupt  # stop before any model is opened (main answers 130)

    monkeypatch.setattr(pipelines, "start", fake_start)
    for var in ("FABULA_ENDPOINT", "FABULA_MODEL", "FABULA_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return seen


@pytest.mark.parametrize(
    "argv",
    [
        ["write", "magnet", STORY, "--words", "300"],
        ["write", "single", STORY, "--words", "300"],
        ["write", "nst", "--prompt", "A keeper finds a letter.", "--words", "600"],
        ["write", "rollsum", "--prompt", "A keeper finds a letter.", "--words", "600"],
        ["write", "direct", "--prompt", "A keeper finds a letter.", "--words", "600"],
    ],
)
def test_fabula_endpoint_in_the_environment_is_used_by_every_writer(argv, captured, monkeypatch, tmp_path):
    with models_server() as listing:
        url = listing.url
        monkeypatch.setenv("FABULA_ENDPOINT", url)
        monkeypatch.setenv("FABULA_MODEL", "fake-model")
        assert main([*argv, "--out", str(tmp_path / "run")]) == 130
    llm = captured["llm"]
    assert llm.backend == "endpoint"
    assert llm.endpoint == url
    assert llm.model == "fake-model"


def test_a_flag_beats_the_environment(captured, monkeypatch, tmp_path):
    with models_server() as listing:
        url = listing.url
        monkeypatch.setenv("FABULA_ENDPOINT", "http://127.0.0.1:9/v1")
        assert (
            main(
                [
                    "write",
                    "magnet",
                    STORY,
                    "--words",
                    "300",
                    "--endpoint",
                    url,
                    "--model",
                    "fake-model",
                    "--out",
                    str(tmp_path / "run"),
                ]
            )
            == 130
        )
    assert captured["llm"].endpoint == url


def test_without_endpoint_anywhere_the_embedded_default_is_used(captured, tmp_path):
    assert main(["write", "magnet", STORY, "--words", "300", "--out", str(tmp_path / "run")]) == 130
    assert captured["llm"].backend == "embedded"


def test_the_run_records_backend_endpoint_and_model_without_credentials(tmp_path, monkeypatch, capsys):
    from agent.cli.show_cmd import render
    from agent.store import RunStore
    from agent.store.reports.stats import summarize
    from agent.testing.story_llm import StoryLLM

    def serving_its_only_model(self, store=None, **kw):
        llm = StoryLLM()
        llm.model = self.model or "fake-model"  # what the server's GET /v1/models names
        return llm

    monkeypatch.setattr(pipelines.LLMOptions, "open", serving_its_only_model)
    with models_server() as listing:
        url = listing.url
        secret = url.replace("http://", "http://user:hunter2@")
        monkeypatch.setenv("FABULA_ENDPOINT", secret)
        code = main(["write", "magnet", STORY, "--words", "150", "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err
    assert code == 0
    shown = url.replace("http://", "http://***@")
    assert f"with backend endpoint at {shown}, model fake-model" in err and "hunter" not in err
    with RunStore.open(tmp_path / "run", readonly=True) as store:
        assert (store.info().backend, store.info().model) == ("endpoint", "fake-model")
        summary = summarize(store)
        sessions = [row[0] for row in store.query("SELECT config FROM sessions")]
    assert summary.endpoint == shown and all("hunter" not in s for s in sessions)
    assert f"(endpoint at {shown})" in render(summary, "run")[1]
