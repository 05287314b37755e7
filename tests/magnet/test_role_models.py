"""Per-role models (``--role-model ROLE=MODEL``, ``--role-endpoint ROLE=URL``): each Magnet role's
requests go to its own model over HTTP, the ledger records the model that answered each call, the
run's configuration records the role models, and a resume keeps them; bad input is one line, exit 2,
and nothing is created."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agent.cli import main
from agent.llm.constraints import JsonSchema
from agent.magnet import prompts
from agent.store import RunStore
from agent.testing.replies import chat_reply, model_list, probe_reply
from agent.testing.server import NO_ROUTE, Answer, Call, FakeServer
from agent.testing.story_llm import StoryLLM

STORY = "agent/magnet/examples/mystery_codicil.toml"
RUN_MODEL, OTHER = "run-model", "other-model"


def role_of(body: dict[str, Any]) -> str:
    """A Magnet request's role, from its instructions as a server sees them: the system message, or the
    user turn's start for the critic and the narrator (their system message is the story)."""
    system, user = body["messages"][0]["content"], body["messages"][1]["content"]
    if system.startswith(prompts.CHARACTER_SYSTEM[:40]):
        return "character"
    if user.startswith("You are the critic"):
        return "critic"
    if user.startswith(prompts.SELECT_ONLY_SYSTEM[:-1]):
        return "narrator-select"
    if user.startswith("You are the narrator"):
        return "narrator"
    if system.startswith(prompts.GOAL_SYSTEM[:40]):
        return "goal"
    if system.startswith(prompts.RECAP_SYSTEM[:40]):
        return "recap"
    assert "transition paragraph" in system, system[:80]
    return "transition"


class RoleServer(FakeServer):
    """Serves ``models`` (vLLM-shaped), answering each Magnet request as the scripted story model does,
    with the model the request named; ``asked`` keeps (role, requested model) of every story request."""

    def __init__(self, *models: str) -> None:
        self.models = models
        self.author = StoryLLM()
        self.asked: list[tuple[str, str]] = []
        self.fail_after: int | None = None
        """Refuse every story request (HTTP 400) once this many were answered (a server that breaks)."""
        self._lock = threading.Lock()
        super().__init__({"GET *": self.get, "POST /v1/chat/completions": self.chat})

    def get(self, call: Call) -> Answer:
        if call.path.startswith("/v1/models"):
            entries = [{"id": m, "object": "model", "owned_by": "vllm", "max_model_len": 32768} for m in self.models]
            return Answer(200, model_list(*entries))
        if call.path == "/version":
            return Answer(200, {"version": "0.32.0"})
        return NO_ROUTE

    def chat(self, call: Call) -> Answer:
        body = call.body
        probe = probe_reply(body)
        if probe is not None:
            return Answer(*probe)
        if self.fail_after is not None and len(self.asked) >= self.fail_after:
            return Answer(400, {"error": {"message": "the model is gone"}})
        role = role_of(body)
        schema = ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")
        with self._lock:
            self.asked.append((role, body["model"]))
            reply = self.author.generate(
                body["messages"],
                JsonSchema(schema) if schema else None,
                temperature=0.0,
                max_tokens=body["max_tokens"],
                role=role,
            )
        return Answer(200, chat_reply(reply.text, model=body["model"], prompt=100, completion=len(reply.text) // 4))


@pytest.fixture(autouse=True)
def _no_model_environment(monkeypatch, tmp_path):
    for name in ("FABULA_ENDPOINT", "FABULA_MODEL", "FABULA_API_KEY", "FABULA_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FABULA_CONFIG", str(tmp_path / "no-config.toml"))


def _ledger(run) -> list[tuple[str, str]]:
    with RunStore.open(run, readonly=True) as store:
        return [(row["role"], row["model"]) for row in store.query("SELECT role, model FROM llm_calls ORDER BY id")]


def _stored_roles(run) -> Any:
    with RunStore.open(run, readonly=True) as store:
        return store.info().config["llm"].get("roles")


def _write(server: RoleServer, run, *extra: str) -> int:
    return main(
        [
            *("write", "magnet", STORY, "--words", "300", "--endpoint", server.url, "--model", RUN_MODEL),
            *("--out", str(run), "--call-timeout", "5", *extra),
        ]
    )


def _by_own_model(asked: list[tuple[str, str]], roles: set[str], own: str) -> bool:
    """Whether exactly the requests of ``roles`` named ``own`` (and every other the run's model)."""
    return all((model == own) == (role in roles) and model in (own, RUN_MODEL) for role, model in asked)


def test_the_critic_asks_its_own_model_the_ledger_says_so_and_a_resume_keeps_it(tmp_path, capsys):
    run = tmp_path / "run"
    with RoleServer(RUN_MODEL, OTHER) as server:
        server.fail_after = 12  # the server breaks after the first steps: the run stops, to be resumed
        assert _write(server, run, "--role-model", "critic=" + OTHER) == 1
        assert f"model {RUN_MODEL}; critic: model {OTHER}" in capsys.readouterr().err
        first = list(server.asked)
        assert {"character", "critic", "narrator"} <= {role for role, _ in first}
        assert _by_own_model(first, {"critic"}, OTHER), first
        written = _ledger(run)
        assert {"critic", "character"} <= {role for role, _ in written}
        assert _by_own_model(written, {"critic"}, OTHER), written
        assert _stored_roles(run) == {"critic": OTHER}

        server.asked.clear()
        server.fail_after = None
        assert main(["resume", str(run)]) == 0, capsys.readouterr().err
        again = list(server.asked)
        assert any(role == "critic" for role, _ in again) and _by_own_model(again, {"critic"}, OTHER), again
        assert _by_own_model(_ledger(run), {"critic"}, OTHER)
        assert _stored_roles(run) == {"critic": OTHER}
        with RunStore.open(run, readonly=True) as store:
            assert store.info().status == "completed"


def test_a_role_on_another_server_is_asked_there_and_a_resume_finds_it_again(tmp_path, capsys):
    run = tmp_path / "run"
    with RoleServer(RUN_MODEL) as main_server, RoleServer(OTHER) as narrator_server:
        main_server.fail_after = 10  # the run's server breaks: the run stops, to be resumed
        assert _write(main_server, run, "--role-endpoint", "narrator=" + narrator_server.url) == 1
        assert {role for role, _ in narrator_server.asked} == {"narrator", "narrator-select"}
        assert all(model == OTHER for _, model in narrator_server.asked)  # that server's only model
        assert not {"narrator", "narrator-select"} & {role for role, _ in main_server.asked}
        assert _stored_roles(run) == {"narrator": OTHER}
        main_server.fail_after, narrated = None, len(narrator_server.asked)
        assert main(["resume", str(run)]) == 0, capsys.readouterr().err
        assert len(narrator_server.asked) > narrated  # the narrator's server, from the run's record
        assert not {"narrator", "narrator-select"} & {role for role, _ in main_server.asked}
    assert _by_own_model(_ledger(run), {"narrator", "narrator-select"}, OTHER)
    assert _stored_roles(run) == {"narrator": OTHER}


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--role-model", "editor=x"], "unknown role 'editor'; roles: character, critic, narrator, goal"),
        (["--role-model", "critic"], "must be ROLE=MODEL"),
        (["--role-model", "critic="], "must be ROLE=MODEL"),
        (["--role-endpoint", "goal=not a url"], "--role-endpoint must be ROLE=URL with a server's base URL"),
    ],
)
def test_bad_role_flags_are_one_line_exit_2_and_nothing_is_created(flags, needle, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["write", "magnet", STORY, "--words", "300", "--out", str(run), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not run.exists()


def test_the_config_file_names_role_models_and_a_flag_beats_it(tmp_path, monkeypatch, capsys):
    config = tmp_path / "config.toml"
    monkeypatch.setenv("FABULA_CONFIG", str(config))
    assert main(["config", "set", "role_models", "critic = other-model,goal=run-model"]) == 0
    assert 'role_models = "critic=other-model, goal=run-model"' in config.read_text()
    with RoleServer(RUN_MODEL, OTHER) as server:
        _write(server, tmp_path / "run", "--role-model", "goal=" + OTHER)
        assert "critic" in {role for role, _ in server.asked}
        assert _by_own_model(server.asked, {"critic", "goal", "transition"}, OTHER), server.asked
    assert _stored_roles(tmp_path / "run") == {"critic": OTHER, "goal": OTHER}
    capsys.readouterr()
    assert main(["config", "set", "role_models", "critic"]) == 2
    assert "role_models must be ROLE=MODEL" in capsys.readouterr().err


def test_role_models_resolve_record_and_come_back_from_the_record():
    from agent.llm.options import ModelChoiceError, ModelFlags, StoredModel, resolve
    from agent.magnet.describe import MODEL_ROLES

    flags = ModelFlags(
        endpoint="http://a:8000/v1",
        model=RUN_MODEL,
        api_key="k",
        role_models={"critic": OTHER},
        role_endpoints={"narrator": "http://b:8001/v1"},
    )
    chosen = resolve(flags, roles=MODEL_ROLES)
    critic, narrator = chosen.roles
    assert (critic.name, critic.serves, critic.options.model, critic.options.api_key) == (
        "critic",
        ("critic",),
        OTHER,
        "k",
    )
    assert (narrator.serves, narrator.options.endpoint, narrator.options.model, narrator.options.api_key) == (
        ("narrator", "narrator-select"),
        "http://b:8001/v1",
        None,  # that server's only model, filled in when it is opened
        None,  # the run's key is not sent to another server
    )
    assert chosen.fingerprinted()["roles"] == {"critic": OTHER, "narrator": None}
    assert chosen.transport()["role_endpoints"] == {"narrator": "http://b:8001/v1"}
    assert "roles" not in resolve(ModelFlags(model=RUN_MODEL), roles=MODEL_ROLES).fingerprinted()  # runs as before

    stored = StoredModel.from_record(
        {"backend": "endpoint", "model": RUN_MODEL, "roles": {"critic": OTHER}},
        {"endpoint": "http://a:8000/v1", "role_endpoints": {"critic": "http://u:***@c/v1"}},
        model_roles=MODEL_ROLES,
    )
    with pytest.raises(ModelChoiceError, match=r"server of the role critic .* credentials"):
        resolve(stored=stored)
    again = resolve(stored=StoredModel.from_record(chosen.fingerprinted(), chosen.transport(), model_roles=MODEL_ROLES))
    assert [(r.name, r.options.model, r.endpoint) for r in again.roles] == [
        ("critic", OTHER, None),
        ("narrator", None, "http://b:8001/v1"),
    ]
    with pytest.raises(ModelChoiceError, match="--role-model: this pipeline has no roles"):
        resolve(ModelFlags(role_models={"critic": OTHER}))


def test_roles_on_one_model_share_one_client_and_the_router_closes_each_once(monkeypatch):
    from agent.llm import backends
    from agent.llm.options import ModelFlags, resolve
    from agent.llm.role_router import RoleRouter
    from agent.magnet.describe import MODEL_ROLES

    opened: list[StoryLLM] = []

    def factory(options, probe, key):
        llm = StoryLLM()
        llm.model = options.model
        llm.close = lambda: opened.remove(llm)  # type: ignore[method-assign]
        opened.append(llm)
        return llm

    monkeypatch.setitem(backends._REGISTERED, "role-test", factory)  # this test's only
    roles = {"critic": RUN_MODEL, "narrator": OTHER, "goal": OTHER}
    router = resolve(ModelFlags(backend="role-test", model=RUN_MODEL, role_models=roles), roles=MODEL_ROLES).open()
    assert isinstance(router, RoleRouter) and len(opened) == 2
    assert router.model_for("critic") is router.default is router.model_for("character")
    assert router.model_for("goal") is router.model_for("narrator-select") is not router.default
    assert router.model_for("recap") is router.default
    router.close()
    assert opened == []


def test_a_magnet_batch_takes_the_config_files_role_models_and_its_resume_keeps_them(tmp_path, monkeypatch):
    import shutil

    from agent.batch import BatchStore

    config = tmp_path / "config.toml"
    monkeypatch.setenv("FABULA_CONFIG", str(config))
    config.write_text(f'role_models = "critic={OTHER}"\n', encoding="utf-8")
    stories = tmp_path / "stories"
    stories.mkdir()
    shutil.copy(STORY, stories)
    out = tmp_path / "batch"
    with RoleServer(RUN_MODEL, OTHER) as server:
        flags = ["--endpoint", server.url, "--model", RUN_MODEL, "--call-timeout", "5"]
        server.fail_after = 12
        assert (
            main(
                [
                    "batch",
                    "--pipeline",
                    "magnet",
                    "--stories",
                    str(stories),
                    "--words",
                    "300",
                    "--out",
                    str(out),
                    *flags,
                ]
            )
            == 1
        )
        assert "critic" in {role for role, _ in server.asked} and _by_own_model(server.asked, {"critic"}, OTHER)
        with BatchStore.open(out, readonly=True) as batch:
            assert batch.info()["llm"]["roles"] == {"critic": OTHER}
            (run,) = [batch.run_path(row) for row in batch.stories()]
        assert _stored_roles(run) == {"critic": OTHER}
        config.unlink()  # the batch's record, not the config file, keeps the roles
        server.asked.clear()
        server.fail_after = None
        assert main(["batch", "resume", str(out)]) == 0
        assert "critic" in {role for role, _ in server.asked} and _by_own_model(server.asked, {"critic"}, OTHER)
    assert _by_own_model(_ledger(run), {"critic"}, OTHER)
