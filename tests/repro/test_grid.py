"""Grid files: the shipped grids parse, and a bad grid is one line, exit 2, nothing created."""

from __future__ import annotations

import pytest

from agent import pipelines
from agent.cli import main
from agent.repro.grid import GridError, load_grid, shipped
from tests.repro.helpers import grid_file


def test_the_shipped_grids_parse_with_the_papers_cells():
    assert shipped() == ["magnet-table1", "nst-ablations", "nst-table3", "smoke"]
    table3 = load_grid("nst-table3")
    assert [m.name for m in table3.methods] == ["NstAgent", "RollSum"] and table3.profile == "paper"
    assert table3.lengths == (10000, 20000, 50000, 100000) and table3.first == 100
    assert table3.stories_at(100000) == 50 and table3.stories_at(20000) == 100
    assert table3.evals == ("consistency", "quality") and len(table3.cells()) == 8
    ablations = load_grid("nst-ablations")
    assert [(m.name, m.settings) for m in ablations.methods] == [
        ("NstAgent", {}),
        ("-State", {"state": False}),
        ("-Lookback", {"lookback": False}),
        ("RollSum", {}),
    ]
    magnet = load_grid("magnet-table1")
    assert magnet.evals == ("editorial",) and magnet.stories is not None and magnet.stories.is_dir()
    assert {m.pipeline for m in magnet.methods} == {"magnet", "single"} and len(magnet.methods) == 5
    smoke = load_grid("smoke")
    assert len(smoke.methods) == 2 and len(smoke.lengths) == 1 and smoke.prompts.is_file()


def test_a_cell_folder_names_method_length_and_seed(tmp_path):
    grid = load_grid(str(grid_file(tmp_path, extra="seeds = [0, 1]")))
    assert [c.folder for c in grid.cells()] == [
        "direct/1000/seed-0",
        "direct/1000/seed-1",
        "rollsum/1000/seed-0",
        "rollsum/1000/seed-1",
    ]


METHODS = '[[methods]]\nname = "Direct"\npipeline = "direct"\n'


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"extra": "colour = 1"}, "unknown key 'colour'"),
        ({"lengths": "[100]"}, "lengths): must be a whole number between 500 and 300000"),
        ({"lengths": "[]"}, "lengths must be a non-empty list"),
        ({"lengths": "[1000, 1000]"}, "lengths repeats a value"),
        ({"methods": '[[methods]]\nname = "X"\npipeline = "nope"\n'}, "pipeline must be one of"),
        ({"methods": METHODS + "set = { bogus = 1 }\n"}, "unknown setting 'bogus'"),
        ({"methods": METHODS + "set = { words = 5 }\n"}, "words comes from the grid"),
        ({"methods": METHODS + METHODS}, "two methods have the same name"),
        ({"methods": METHODS + '\n[[methods]]\nname = "M"\npipeline = "magnet"\n'}, "takes the same input"),
        ({"extra": "seeds = [0, 0]"}, "seeds repeats a value"),
        ({"extra": "[judge]\nmax_tokens = 0"}, "judge.max_tokens must be a whole number of at least 1"),
        ({"extra": "[judge]\ncolour = 1"}, "judge: unknown key 'colour'"),
        ({"extra": "first = 2"}, "does not go with first"),
        ({"body": "tables = 'NstAgent'\n"}, "lengths must be a non-empty list"),
        ({"body": "tables = 'novel'\n"}, "tables must be one of NstAgent, Magnet"),
        ({"body": "not toml ="}, "not TOML"),
    ],
)
def test_a_bad_grid_is_one_line_exit_2_and_nothing_is_created(tmp_path, capsys, monkeypatch, change, message):
    def no_model(*args, **kw):
        raise AssertionError("a bad grid opened a model")

    monkeypatch.setattr(pipelines.LLMOptions, "open", no_model)
    path = grid_file(tmp_path, **change)
    out = tmp_path / "out"
    assert main(["repro", str(path), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not out.exists()


def test_a_missing_prompt_id_or_grid_is_one_line(tmp_path, capsys):
    path = grid_file(tmp_path, extra="", lengths="[1000]")
    path.write_text(path.read_text().replace('ids = "1-2"', 'ids = "9"'))
    assert main(["repro", str(path), "-o", str(tmp_path / "out")]) == 2
    assert "no prompt with id 9" in capsys.readouterr().err and not (tmp_path / "out").exists()
    assert main(["repro", "no-such-grid"]) == 2
    assert "neither a shipped grid (magnet-table1, nst-ablations, nst-table3, smoke)" in capsys.readouterr().err
    with pytest.raises(GridError, match="not a folder of story definitions"):
        load_grid(
            str(
                grid_file(
                    tmp_path,
                    name="m",
                    body='tables = "Magnet"\nlengths = [1000]\nstories = "nowhere"\n'
                    '[[methods]]\nname = "M"\npipeline = "magnet"\n',
                )
            )
        )
