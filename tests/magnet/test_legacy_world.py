"""A Magnet run written before (subject, attribute) addressing still shows its history, exports
its graph and resumes: its flat world is read through the tolerant reader."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from agent.cli import main
from agent.magnet.world import WorldGraph
from agent.store import RunStore

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_d73c811" / "magnet"


def test_legacy_history_graph_and_world(tmp_path, capsys):
    run = tmp_path / "magnet"
    shutil.copytree(LEGACY, run)
    with RunStore.open(run, readonly=True) as store:
        raw = store.state()["world"]
        assert "format" not in raw  # really the old flat shape
        world = WorldGraph.from_json(raw)
    assert len(set(world.pairs())) == len(world.pairs())
    assert all(subject in ("world", *world.characters) for subject, _ in world.pairs())
    assert main(["show", str(run), "--history"]) == 0
    out = capsys.readouterr().out
    assert "history   step 1" in out
    assert main(["export", str(run), "--graph", "json"]) == 0
    graph = json.loads(capsys.readouterr().out)
    variables = [n for n in graph["nodes"] if n["kind"] == "variable"]
    assert variables and all(n["label"] == f"{n['subject']}.{n['attribute']}" for n in variables)
    assert main(["export", str(run), "--graph", "svg"]) == 0
