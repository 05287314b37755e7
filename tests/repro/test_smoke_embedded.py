"""``fabula repro smoke`` on the embedded 135M model: one prompt, 500 words, NstAgent and RollSum,
written, judged by the same model and reported as NstAgent's Tables 3, 8 and 4. The tiny model's
numbers mean nothing and the report says so; what is checked is that the whole road runs and the
tables have the papers' rows and columns."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agent.batch.store import BatchStore
from agent.cli import main
from agent.repro.tables import TINY_NOTE
from agent.weights.home import fabula_home
from tests.conftest import _missing

pytestmark = [pytest.mark.embedded, pytest.mark.slow]
"""360 s in CI (#35): .ci/scheduled runs it; CI keeps its parts on the real model (an NstAgent story,
tests/nst/test_embedded.py; judgments, tests/eval/test_embedded_judge.py) and the repro road scripted
(tests/repro/test_flow.py)."""


def test_fabula_repro_smoke_on_the_embedded_model(tmp_path, monkeypatch, capsys):
    missing = _missing("torch", "transformers", "outlines", "outlines_core")
    if missing:
        pytest.skip(f"embedded backend not installed (missing {', '.join(missing)})")
    home = tmp_path / "home"  # plans and logs here; the converted model is the shared one
    home.mkdir()
    (home / "models").symlink_to(fabula_home() / "models", target_is_directory=True)
    monkeypatch.setenv("FABULA_HOME", str(home))
    for name in ("FABULA_ENDPOINT", "FABULA_JUDGE_ENDPOINT", "FABULA_MODEL", "FABULA_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "smoke"
    started = time.monotonic()
    code = main(["repro", "smoke", "-o", str(out), "--quiet"])
    wall = time.monotonic() - started
    printed = capsys.readouterr().out
    assert code in (0, 1), printed  # 1: a tiny-model story or judgment did not finish (said in the report)
    report = (out / "report.md").read_text()
    assert report in printed and TINY_NOTE in report
    for header in (
        "| Model | Method | Target Length | Subtype CED (↓) | Instance CED (↓) | Writing Quality (↑) | "
        "Avg. Words | n scored |",
        "| Model | Method | Length | read | search | write | correct | update |",
        "| Method | Length | Calls | Input Tokens | Cached Input | Output Tokens |",
    ):
        assert header in report
    table3 = report.split("## Table 3")[1].split("## ")[0]
    assert "| SmolLM2-135M (embedded) | NstAgent | 500 |" in table3
    assert "| SmolLM2-135M (embedded) | RollSum | 500 |" in table3
    rows = json.loads((out / "rows.json").read_text())
    assert sorted(r["method"] for r in rows) == ["NstAgent", "RollSum"]
    assert all(r["llm_calls"] > 0 for r in rows)
    judged = [r for r in rows if r["consistency_judges"] or r["writing_quality"] is not None]
    assert judged or "judgments: 0 made" not in printed, printed
    # a rerun (here without the judge) writes nothing again: every finished story keeps its one attempt
    again = time.monotonic()
    assert main(["repro", "smoke", "-o", str(out), "--quiet", "--no-judge"]) in (0, 1)
    rerun = time.monotonic() - again
    for cell in ("nstagent", "rollsum"):
        with BatchStore.open(out / cell / "500" / "seed-0", readonly=True) as batch:
            assert all(r.attempts == 1 for r in batch.stories() if r.status == "completed")
    assert Path(out / "criteria").is_dir()
    # measured 2026-12-02 on 2 busy cores (a CI run and two servers beside it): 673 s, the writing 219 s of it
    print(
        f"fabula repro smoke on the embedded model: {wall:.0f} s (rerun without the judge {rerun:.0f} s), exit {code}"
    )
