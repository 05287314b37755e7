"""The hostile suite, round three (#39): the config file as reliable as the run store, credentials
bound to the server they were configured for, and a view that answers only its own host names.
Each case was seen failing on 45bb0a8."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent.cli import main
from agent.llm.options import ModelFlags, StoredModel, resolve


def run_cli(argv) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


@pytest.fixture
def config(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "home" / "config.toml"
    monkeypatch.setenv("FABULA_CONFIG", str(path))
    for name in ("FABULA_ENDPOINT", "FABULA_API_KEY", "FABULA_MODEL", "FABULA_EMBEDDED_ENGINE"):
        monkeypatch.delenv(name, raising=False)
    return path


# -- the config file -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("embedded_engine", "bogus", "embedded_engine must be one of"),
        ("model", "a\x7fb", "control characters"),
        ("endpoint", "http://127.0.0.1:99999/v1", "Port out of range"),
        ("endpoint", "http://[::1/v1", "not a valid URL"),
    ],
)
def test_config_set_refuses_what_the_reader_would_refuse(key, value, problem, config, capsys):
    assert run_cli(["config", "set", key, value]) == 2
    assert problem in capsys.readouterr().err
    assert not config.exists() or key not in config.read_text(encoding="utf-8")
    assert run_cli(["config", "show"]) == 0  # every command still reads the file


def test_config_unset_and_set_repair_a_damaged_key(config, capsys):
    config.parent.mkdir(parents=True)
    config.write_text('model = "ok"\nembedded_engine = "bogus"\nendpoint = "a\x7fb"\n', encoding="utf-8")
    assert run_cli(["config", "show"]) == 2
    assert run_cli(["config", "unset", "endpoint"]) == 0
    assert run_cli(["config", "set", "embedded_engine", "auto"]) == 0
    assert run_cli(["config", "show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert shown["model"]["value"] == "ok" and shown["embedded_engine"]["value"] == "auto"


def test_config_set_follows_no_planted_temporary_link_and_writes_through_a_symlinked_file(config, tmp_path):
    config.parent.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_text("keep me\n", encoding="utf-8")
    (config.parent / "config.toml.tmp").symlink_to(victim)
    real = tmp_path / "dotfiles" / "fabula.toml"
    real.parent.mkdir()
    real.write_text('model = "m0"\n', encoding="utf-8")
    config.symlink_to(real)
    assert run_cli(["config", "set", "model", "m1"]) == 0
    assert victim.read_text(encoding="utf-8") == "keep me\n"
    assert config.is_symlink() and 'model = "m1"' in real.read_text(encoding="utf-8")


def _set(key: str, value: str) -> None:
    os._exit(run_cli(["config", "set", key, value]))


def test_concurrent_config_sets_lose_no_key(config):
    import multiprocessing

    values = {
        "endpoint": "http://127.0.0.1:8000/v1",
        "model": "m",
        "profile": "small",
        "call_timeout": "30",
        "allow_unconstrained": "true",
        "embedded_engine": "auto",
        "judge_endpoint": "http://127.0.0.1:8001/v1",
        "judge_model": "j",
    }
    fork = multiprocessing.get_context("fork")  # eight processes at once, each a whole read-modify-write
    for _ in range(3):
        config.unlink(missing_ok=True)
        procs = [fork.Process(target=_set, args=item) for item in values.items()]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=60)
        assert [p.exitcode for p in procs] == [0] * len(values)
        text = config.read_text(encoding="utf-8")
        assert all(f"{k} = " in text for k in values), text


def test_url_credentials_are_redacted_by_config_set_and_show(config, capsys):
    assert run_cli(["config", "set", "endpoint", "http://user:s3cret@127.0.0.1:8000/v1"]) == 0
    assert run_cli(["config", "show"]) == 0
    assert run_cli(["config", "show", "--json"]) == 0
    out = capsys.readouterr().out
    assert "s3cret" not in out and "***@127.0.0.1:8000" in out


# -- credentials bound to their server -----------------------------------------------------------------------
def test_a_key_is_not_sent_to_a_server_a_run_recorded():
    recorded = StoredModel(backend="endpoint", endpoint="http://elsewhere.example:8000/v1", model="m")
    env = {"FABULA_API_KEY": "k"}
    assert resolve(environ=env, stored=recorded).api_key is None
    assert resolve(environ=env, config={"api_key": "c"}, stored=recorded).api_key is None
    # named again by the user (its own key's server, or a flag): the key goes
    assert resolve(environ={**env, "FABULA_ENDPOINT": "http://ELSEWHERE.example:8000"}, stored=recorded).api_key == "k"
    assert resolve(ModelFlags(endpoint="http://elsewhere.example:8000/v1"), environ=env, stored=recorded).api_key == "k"
    assert resolve(ModelFlags(api_key="given"), environ=env, stored=recorded).api_key == "given"


def test_a_grid_files_judge_gets_the_users_judge_key_only_on_the_keys_own_server(monkeypatch, tmp_path):
    from agent.cli.options import choose_judge

    monkeypatch.setenv("FABULA_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.setenv("FABULA_JUDGE_API_KEY", "judge-key")
    monkeypatch.setenv("FABULA_JUDGE_ENDPOINT", "http://127.0.0.1:8001/v1")
    assert choose_judge("http://attacker.example/v1", "j", None, endpoint_source="the grid file").api_key is None
    assert choose_judge("http://127.0.0.1:8001/v1", "j", None, endpoint_source="the grid file").api_key == "judge-key"
    assert choose_judge("http://attacker.example/v1", "j", None).api_key == "judge-key"  # the user's own flag


# -- the view answers only its own host names ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("listen", "host", "answered"),
    [
        (None, "127.0.0.1:8765", True),
        (None, "localhost:8765", True),
        (None, "attacker.example:8765", False),
        (None, "127.0.0.1.attacker.example", False),
        ("192.168.1.5", "192.168.1.5:8765", True),
        ("192.168.1.5", "rebind.example", False),
        ("0.0.0.0", "anything.example", True),
    ],
)
def test_the_view_refuses_a_host_name_that_is_not_its_own(listen, host, answered, tmp_path, monkeypatch):
    import uvicorn
    from starlette.testclient import TestClient

    served = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: served.update(app=app))
    argv = ["view", str(tmp_path), "--port", "8765"] + (["--host", listen] if listen else [])
    monkeypatch.setattr("agent.cli.view_cmd._check_bind", lambda host, port: None)
    assert main(argv) == 0
    response = TestClient(served["app"]).get("/", headers={"Host": host})
    assert (response.status_code == 200) is answered, response.status_code
