"""The story target is read through one typed reader for every pipeline.

Regression: ``fabula eval metrics`` on a Magnet run never reported length-gate compliance,
because the eval read ``words``/``pages`` while a stored Magnet definition has ``target_words``.
The runs here are databases written by d73c811 (tests/fixtures/legacy_d73c811), not dicts
built by hand.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agent.eval.story import load_story
from agent.eval.textmetrics import model_free_metrics
from agent.store import RunStore

LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "legacy_d73c811"


@pytest.fixture
def legacy(tmp_path):
    def copy(name: str) -> Path:
        shutil.copytree(LEGACY / name, tmp_path / name)
        return tmp_path / name

    return copy


@pytest.mark.parametrize(
    ("name", "target", "unit"),
    [
        ("magnet", 400, "story"),
        ("single", 300, "story"),
        ("direct", 1200, "story"),
        ("nst", 1200, "chapter"),
    ],
)
def test_every_pipeline_has_a_target_and_a_gate_verdict(legacy, name, target, unit):
    with RunStore.open(legacy(name), readonly=True) as store:
        story = load_story(store)
        metrics = model_free_metrics(store, story)
    assert story.target_words == target
    assert metrics["gate_unit"] == unit
    assert metrics["gate_checked"] >= 1
    assert metrics["gate_compliance"] is not None


def test_magnet_cli_metrics_report_gate_compliance(legacy, capsys):
    from agent.cli import main

    run = legacy("magnet")
    assert main(["eval", "metrics", str(run), "--json"]) == 0
    out = capsys.readouterr().out
    assert '"gate_compliance": null' not in out and '"gate_unit": "story"' in out
