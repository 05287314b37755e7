"""``fabula repro GRID --estimate``: a simulated story per method and length through the real
pipeline, multiplied by the cell's stories and seeds; hours from tokens per second; nothing written."""

from __future__ import annotations

import re

from agent.cli import main
from agent.repro.estimate import CellEstimate, estimate, render
from agent.repro.grid import load_grid
from tests.repro.helpers import grid_file

NST = '[[methods]]\nname = "NstAgent"\npipeline = "nst"\n\n[[methods]]\nname = "Direct"\npipeline = "direct"\n'


def test_the_estimate_simulates_each_method_at_its_real_length(tmp_path):
    grid = load_grid(str(grid_file(tmp_path, methods=NST, lengths="[1000, 4000]", extra="seeds = [0, 1]")))
    cells = estimate(grid)
    assert [(c.method, c.words, c.stories, c.seeds) for c in cells] == [
        ("NstAgent", 1000, 2, 2),
        ("NstAgent", 4000, 2, 2),
        ("Direct", 1000, 2, 2),
        ("Direct", 4000, 2, 2),
    ]
    nst1, nst4, direct1, direct4 = cells
    assert direct1.calls == direct4.calls == 1  # one call writes the whole story
    assert nst4.calls > nst1.calls > 3  # a planner, then a tool loop per chapter: more chapters, more calls
    for c in cells:  # the prose alone is at least the story's words in tokens
        assert c.completion_tokens >= c.words * 1.3 * 0.8 and c.prompt_tokens > 0
    assert nst4.prompt_tokens / nst4.calls > nst1.prompt_tokens / nst1.calls  # each turn resends a growing state


def test_the_arithmetic_of_hours_and_totals():
    cell = CellEstimate("M", 1000, seeds=2, stories=3, calls=10, prompt_tokens=1000, completion_tokens=1800)
    assert cell.hours(1.0) == 3 * 2 * 1800 / 3600
    grid = load_grid("smoke")
    lines = render(grid, [cell, CellEstimate("N", 1000, 1, 4, 5, 100, 900)], 0.5, "given")
    assert re.search(r"^M +1000 +6 +60 +6,000 +10,800 +6\.0$", lines[2], re.M), lines[2]
    assert re.search(r"^N +1000 +4 +20 +400 +3,600 +2\.0$", lines[3], re.M), lines[3]
    assert re.search(r"^total +80 +6,400 +14,400 +8\.0$", lines[4], re.M), lines[4]


def test_the_estimate_on_the_command_line_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FABULA_ENDPOINT", raising=False)
    grid = grid_file(tmp_path, methods=NST)
    assert main(["repro", str(grid), "--estimate", "--tokens-per-s", "100"]) == 0
    out = capsys.readouterr().out
    assert "100 completion tokens/s (given (--tokens-per-s))" in out and re.search(r"^NstAgent +1000 +2 ", out, re.M)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.toml", "prompts.jsonl"]
    assert main(["repro", str(grid), "--estimate"]) == 2  # the embedded model: no server to measure on
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--estimate needs --tokens-per-s N, or a server" in err[0]


def test_the_shipped_table3_grid_is_estimated_without_its_prompt_set(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no constory_prompts_en.jsonl here: the grid's counts are used
    assert main(["repro", "nst-table3", "--estimate", "--tokens-per-s", "400"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^NstAgent +100000 +50 ", out, re.M) and re.search(r"^RollSum +10000 +100 ", out, re.M)
    assert list(tmp_path.iterdir()) == []
