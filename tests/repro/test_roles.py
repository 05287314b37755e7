"""Per-role models in ``fabula repro``: a grid's ``[roles]`` and a method's ``roles`` give Magnet's roles
models of their own, over the config file's and under ``--role-model``/``--role-endpoint``; each role's
requests reach its own model, every cell's batch and run record them, and a rerun of the grid goes on
with what a cell recorded. A role no pipeline of the grid has is one line, exit 2, before anything runs;
``--estimate`` is the same with roles or without."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from agent import pipelines
from agent.batch import BatchStore
from agent.cli import main
from agent.repro.grid import load_grid
from tests.magnet.role_server import OTHER, RUN_MODEL, RoleServer, ledger, stored_roles
from tests.repro.helpers import grid_file

ROOT = Path(__file__).resolve().parents[2]
THIRD = "third-model"
CELL = Path("magnet/500/seed-0")


@pytest.fixture(autouse=True)
def _no_model_environment(monkeypatch, tmp_path):
    for name in ("FABULA_ENDPOINT", "FABULA_MODEL", "FABULA_API_KEY", "FABULA_BACKEND"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("FABULA_CONFIG", str(tmp_path / "config.toml"))


def magnet_grid(root: Path, roles: str = "", method: str = "", more: str = "") -> Path:
    """A Magnet grid of one story at 500 words: ``roles``, the grid's ``[roles]`` body; ``method``, the
    Magnet method's extra lines; ``more``, other methods."""
    stories = root / "stories"
    stories.mkdir(exist_ok=True)
    shutil.copy(ROOT / "agent" / "magnet" / "examples" / "mystery_codicil.toml", stories)
    path = root / "m.toml"
    path.write_text(
        'name = "m"\ntables = "Magnet"\nprofile = "default"\nstories = "stories"\nlengths = [500]\n'
        '\n[[methods]]\nname = "Magnet"\npipeline = "magnet"\n'
        + method
        + more
        + (f"\n[roles]\n{roles}" if roles else "")
    )
    return path


def repro(grid: Path, out: Path, server: RoleServer, *more: str) -> int:
    return main(
        [
            *("repro", str(grid), "-o", str(out), "--no-judge"),
            *("--endpoint", server.url, "--model", RUN_MODEL, "--call-timeout", "5", *more),
        ]
    )


NARRATOR = "narrator-model"
EXPECTED = {
    "critic": OTHER,  # the grid's [roles] over the config file's
    "goal": THIRD,  # the method's roles over the grid's
    "transition": THIRD,  # the goal generator's other call
    "character": THIRD,  # the config file's: neither the grid nor the method names it
    "narrator": NARRATOR,  # on a server of its own (the grid's), that server's only model
    "narrator-select": NARRATOR,
}


def test_a_grids_role_models_reach_each_roles_own_model_and_are_recorded(tmp_path, capsys):
    (tmp_path / "config.toml").write_text(f'role_models = "critic={THIRD}, character={THIRD}"\n')
    out = tmp_path / "out"
    with RoleServer(RUN_MODEL, OTHER, THIRD) as server, RoleServer(NARRATOR) as narrator_server:
        grid = magnet_grid(
            tmp_path,
            roles=f'critic = "{OTHER}"\ngoal = "{OTHER}"\nnarrator = {{ endpoint = "{narrator_server.url}" }}\n',
            method=f'roles = {{ goal = "{THIRD}" }}\n',
        )
        assert repro(grid, out, server) == 0, capsys.readouterr().err
    described = (
        f"Magnet: character: model {THIRD}; critic: model {OTHER}; narrator: model {NARRATOR} at "
        f"{narrator_server.url}; goal: model {THIRD}"
    )
    assert described in capsys.readouterr().err
    assert {"character", "critic", "goal"} <= {role for role, _ in server.asked}
    assert {role for role, _ in narrator_server.asked} == {"narrator", "narrator-select"}
    asked = server.asked + narrator_server.asked
    wrong = [(role, model) for role, model in asked if model != EXPECTED.get(role, RUN_MODEL)]
    assert not wrong, wrong
    roles = {"character": THIRD, "critic": OTHER, "narrator": NARRATOR, "goal": THIRD}
    with BatchStore.open(out / CELL, readonly=True) as batch:
        assert batch.info()["llm"]["roles"] == roles
        assert batch.info()["llm"]["role_endpoints"] == {"narrator": narrator_server.url}
        (run,) = [batch.run_path(row) for row in batch.stories()]
    assert stored_roles(run) == roles  # the run's configuration: fabula resume keeps them
    assert all(model == EXPECTED.get(role, RUN_MODEL) for role, model in ledger(run))
    assert json.loads((out / CELL / "cell.json").read_text())["roles"] == {"critic": OTHER, "goal": THIRD}


def test_a_flag_beats_the_grid_and_a_rerun_goes_on_with_the_recorded_role_model(tmp_path, capsys):
    grid = magnet_grid(tmp_path, roles=f'critic = "{OTHER}"\n')
    out = tmp_path / "out"
    with RoleServer(RUN_MODEL, OTHER, THIRD) as server:
        server.fail_after = 12  # the server breaks after the first steps: the story stops, to be continued
        assert repro(grid, out, server, "--role-model", f"critic={THIRD}") == 1
        critic = {model for role, model in server.asked if role == "critic"}
        assert critic == {THIRD}, server.asked
        server.asked.clear()
        server.fail_after = None
        assert repro(grid, out, server) == 0, capsys.readouterr().err  # no flag: the cell's record, not the grid
        again = {model for role, model in server.asked if role == "critic"}
        assert again == {THIRD}, server.asked
    with BatchStore.open(out / CELL, readonly=True) as batch:
        (row,) = batch.stories()
        assert row.status == "completed"
        run = batch.run_path(row)
    assert stored_roles(run) == {"critic": THIRD}
    assert {model for role, model in ledger(run) if role == "critic"} == {THIRD}


def test_an_in_process_writer_shared_by_the_grid_still_gives_each_role_its_own_model(tmp_path, monkeypatch, capsys):
    """A backend that is not a server: the grid shares the run's model, yet a cell with role models is
    written through its own (its roles' models opened with it)."""
    from agent.llm import backends
    from agent.testing.story_llm import StoryLLM

    opened: list[StoryLLM] = []

    def factory(options, probe, key):
        llm = StoryLLM()
        llm.model = options.model
        opened.append(llm)
        return llm

    monkeypatch.setitem(backends._REGISTERED, "role-test", factory)  # this test's only
    grid = magnet_grid(tmp_path, roles=f'critic = "{OTHER}"\n')
    out = tmp_path / "out"
    flags = ["--backend", "role-test", "--model", RUN_MODEL, "--no-judge", "--quiet"]
    assert main(["repro", str(grid), "-o", str(out), *flags]) == 0, capsys.readouterr().err
    asked = [(r.role, llm.model) for llm in opened for r in llm.requests]
    assert {"critic", "character", "narrator"} <= {role for role, _ in asked}
    assert all((model == OTHER) == (role == "critic") for role, model in asked), asked
    with BatchStore.open(out / CELL, readonly=True) as batch:
        (run,) = [batch.run_path(row) for row in batch.stories()]
    assert stored_roles(run) == {"critic": OTHER}


SINGLE = '\n[[methods]]\nname = "Single Model"\npipeline = "single"\n'


@pytest.mark.parametrize(
    ("grid", "flags", "message"),
    [
        (
            {},
            ["--role-model", "editor=x"],
            "--role-model: unknown role 'editor'; roles: character, critic, narrator, goal",
        ),
        ({}, ["--role-endpoint", "editor=http://h:1/v1"], "--role-endpoint: unknown role 'editor'"),
        ({}, ["--role-model", "critic"], "--role-model must be ROLE=MODEL"),
        ({"roles": 'editor = "x"\n'}, [], "roles: unknown role 'editor'; roles: character, critic, narrator, goal"),
        ({"method": 'roles = { editor = "x" }\n'}, [], "methods (Magnet): roles: unknown role 'editor'"),
        ({"more": SINGLE + 'roles = { critic = "x" }\n'}, [], "roles: single has no roles with models of their own"),
        ({"roles": 'critic = { model = "x", port = 1 }\n'}, [], 'roles.critic must be "MODEL" or'),
        ({"roles": 'critic = { endpoint = "not a url" }\n'}, [], "roles.critic: the endpoint must be a server's"),
        ({"roles": "critic = 3\n"}, [], 'roles.critic must be "MODEL" or'),
        ({"nst": True}, ["--role-model", "critic=x"], "--role-model: no method of this grid has roles"),
        ({"nst": True, "roles": 'critic = "x"\n'}, [], "roles: no method of this grid has roles"),
    ],
)
@pytest.mark.parametrize("estimate", [False, True])
def test_a_bad_role_is_one_line_exit_2_before_anything_runs(
    tmp_path, capsys, monkeypatch, grid, flags, message, estimate
):
    def no_model(*args, **kw):
        raise AssertionError("a bad role opened a model")

    monkeypatch.setattr(pipelines.LLMOptions, "open", no_model)
    if grid.get("nst"):
        path = grid_file(tmp_path, extra=f"[roles]\n{grid['roles']}" if "roles" in grid else "")
    else:
        path = magnet_grid(tmp_path, grid.get("roles", ""), grid.get("method", ""), grid.get("more", ""))
    out = tmp_path / "out"
    more = ["--estimate", "--tokens-per-s", "100"] if estimate else ["--endpoint", "http://127.0.0.1:9/v1"]
    assert main(["repro", str(path), "-o", str(out), *more, *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_grid_roles_are_the_magnet_methods_only_and_part_of_a_cells_settings(tmp_path):
    grid = load_grid(str(magnet_grid(tmp_path, roles=f'critic = "{OTHER}"\n', more=SINGLE)))
    magnet, single = grid.methods
    assert dict(grid.roles_of(magnet).models) == {"critic": OTHER} and not grid.roles_of(single)
    plain = load_grid(str(magnet_grid(tmp_path, more=SINGLE)))
    digests = [grid.cell_digest(c) for c in grid.cells()]
    assert plain.cell_digest(plain.cells()[0]) != digests[0]  # another critic model: another cell
    assert plain.cell_digest(plain.cells()[1]) == digests[1]  # the single model: unchanged
    server = load_grid(str(magnet_grid(tmp_path, roles='critic = { endpoint = "http://h:1/v1" }\n')))
    assert server.cell_digest(server.cells()[0]) == plain.cell_digest(plain.cells()[0])  # a server may move


def test_the_estimate_is_the_same_with_role_models(tmp_path, capsys):
    plain = magnet_grid(tmp_path)
    assert main(["repro", str(plain), "--estimate", "--tokens-per-s", "100"]) == 0
    before = capsys.readouterr().out
    roles = magnet_grid(tmp_path, roles=f'critic = "{OTHER}"\n')
    assert main(["repro", str(roles), "--estimate", "--tokens-per-s", "100", "--role-model", "goal=x"]) == 0
    assert capsys.readouterr().out == before and "Magnet" in before
