"""``fabula repro`` on scripted models: write, judge and report; a rerun redoes nothing; a grid
grows; a failed story is continued by the rerun through the batch; a changed method is refused."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agent import pipelines
from agent.batch.store import BatchStore
from agent.cli import main
from agent.llm.types import LLMError
from agent.testing.author import Author, gate_of
from agent.testing.scripted import ScriptedLLM
from tests.eval.helpers import judge_llm
from tests.repro.helpers import grid_file, judge_fn

ROOT = Path(__file__).resolve().parents[2]
JUDGE = "http://judge.invalid/v1"
M = r"SmolLM2-135M \(embedded\)"
TABLE3 = "| Model | Method | Target Length | Subtype CED (↓) | Instance CED (↓) | Writing Quality (↑) | Avg. Words |"
TABLE8 = (
    "| Model | Method | Length | read | search | write | correct | update | write / all tools per chapter | "
    "Characters | Past events | Open req. |"
)
TABLE4 = "| Method | Length | Calls | Input Tokens | Cached Input | Output Tokens |"
NST_AND_ROLLSUM = (
    '[[methods]]\nname = "NstAgent"\npipeline = "nst"\n\n[[methods]]\nname = "RollSum"\npipeline = "rollsum"\n'
)


class Models:
    """What the CLI opens: the judge at ``JUDGE``, else the next queued author (a fresh one)."""

    def __init__(self, monkeypatch) -> None:
        self.authors: list[Author] = []
        self.opened: list[Author] = []
        self.judges: list[ScriptedLLM] = []
        models = self

        def open_(options, *args, **kw):
            if options.endpoint == JUDGE:
                models.judges.append(judge_llm(judge_fn({"Mark": 6})))
                return models.judges[-1]
            models.opened.append(models.authors.pop(0) if models.authors else Author())
            return models.opened[-1]

        monkeypatch.setattr(pipelines.LLMOptions, "open", open_)

    def written(self) -> int:
        return sum(len(a.requests) for a in self.opened)

    def judged(self) -> int:
        return sum(len(j.requests) for j in self.judges)


@pytest.fixture
def models(monkeypatch, tmp_path):
    monkeypatch.setenv("FABULA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FABULA_ENDPOINT", raising=False)
    return Models(monkeypatch)


def repro(grid: Path, out: Path, *more: str) -> int:
    return main(["repro", str(grid), "-o", str(out), "--quiet", "--judge-endpoint", JUDGE, *more])


def test_a_grid_is_written_judged_and_reported_as_the_papers_tables(tmp_path, models, capsys):
    grid = grid_file(tmp_path, methods=NST_AND_ROLLSUM)
    out = tmp_path / "out"
    assert repro(grid, out) == 0, capsys.readouterr()
    report = (out / "report.md").read_text()
    assert report in capsys.readouterr().out
    for header in (TABLE3, TABLE8, TABLE4):
        assert header in report
    # Table 3: one row per method and length, both stories scored, quality from the judge
    row = re.search(rf"\| {M} \| NstAgent \| 1K \| 0\.000 \| 0\.000 \| 6\.000 \| [\d,]+ \| 2 \|", report)
    assert row and re.search(rf"\| {M} \| RollSum \| 1K \| 0\.000 \| 0\.000 \| 6\.000 \| [\d,]+ \| 2 \|", report), (
        report
    )
    # the paired tests: NstAgent against RollSum per metric and length, Holm across the lengths
    assert "## Paired tests: NstAgent (A) against each other method (B)" in report
    assert re.search(r"\| RollSum \| instance_ced \| 1000 \| 2 \|", report)
    assert "Holm's correction within each metric across the lengths" in report
    # Table 8: NstAgent's own tool calls per story, from its ledger; RollSum has none
    t8 = re.search(rf"\| {M} \| NstAgent \| 1K \| 0\.0 \| 0\.0 \| (\d+\.\d) \| 0\.0 \| (\d+\.\d) \|", report)
    assert t8 and float(t8.group(1)) >= 1 and float(t8.group(2)) >= 1
    assert "| RollSum | 1K | 0.0" not in report.split("## Table 8")[1].split("## Table 4")[0]
    # Table 4: calls and tokens per story, from the ledgers
    rows = json.loads((out / "rows.json").read_text())
    nst = [r for r in rows if r["method"] == "NstAgent"]
    mean_calls = sum(r["llm_calls"] for r in nst) / len(nst)
    assert f"| NstAgent | 1K | {mean_calls:,.1f} |" in report
    assert {r["prompt_key"] for r in rows} == {"id:1|seed=0", "id:2|seed=0"}
    assert "written on the embedded 135M model" in report  # recorded as the embedded default: its warning
    # a rerun redoes nothing: no story written, no judgment asked
    written, judged = models.written(), models.judged()
    assert repro(grid, out) == 0
    assert models.written() == written and models.judged() == judged
    assert (out / "report.md").read_text() == report
    assert repro(grid, out, "--no-judge") == 0 and models.written() == written and models.judged() == judged


def test_a_grid_grows_and_only_what_is_new_is_written_and_judged(tmp_path, models, capsys):
    grid = grid_file(tmp_path)
    out = tmp_path / "out"
    assert repro(grid, out) == 0
    written, judged = models.written(), models.judged()
    grid.write_text(grid.read_text().replace('ids = "1-2"', 'ids = "1-3"').replace("[1000]", "[1000, 2000]"))
    assert repro(grid, out) == 0
    said = capsys.readouterr().out
    assert "direct/1000/seed-0: 1 new story (3)" in said and "rollsum/2000/seed-0: new, 3 stories" in said
    with BatchStore.open(out / "direct" / "1000" / "seed-0", readonly=True) as batch:
        rows = batch.stories()
    assert [r.key for r in rows] == ["1", "2", "3"] and all(r.attempts == 1 for r in rows)
    # new: story 3 at 1000 words and three stories at 2000 words, per method (8 of the 12 stories)
    new_requests = [r for a in models.opened[-1:] for r in a.requests]
    assert new_requests and models.written() > written
    asked = models.judged() - judged
    assert asked == 8 * (5 + 5) + 5  # 5 consistency and 5 quality calls a story, criteria for prompt 3
    report = (out / "report.md").read_text()
    assert "| Direct | 2K | 0.000 | 0.000 | 6.000 | 2,000 | 3 |" in report and "12 of 12 stories completed" in report


def test_a_failed_story_is_continued_by_the_rerun_through_the_batch(tmp_path, models, capsys):
    grid = grid_file(tmp_path, methods='[[methods]]\nname = "RollSum"\npipeline = "rollsum"\n')
    out = tmp_path / "out"
    broken = Author(length=lambda request, attempt: gate_of(request)[0])
    calls = {"n": 0}
    reply = broken.reply

    def failing(request):
        calls["n"] += 1
        if request.role == "rollsum_chapter" and calls["n"] > 6:
            raise LLMError("the server went away")
        return reply(request)

    broken.reply = failing
    models.authors.append(broken)
    assert repro(grid, out) == 1
    with BatchStore.open(out / "rollsum" / "1000" / "seed-0", readonly=True) as batch:
        before = {r.key: (r.status, r.units) for r in batch.stories()}
    assert "failed" in {s for s, _ in before.values()}
    assert repro(grid, out) == 0
    with BatchStore.open(out / "rollsum" / "1000" / "seed-0", readonly=True) as batch:
        after = {r.key: (r.status, r.units, r.attempts) for r in batch.stories()}
    assert all(s == "completed" for s, _, _ in after.values())
    for key, (status, _units) in before.items():  # a completed story was not written again
        if status == "completed":
            assert after[key][2] == 1
    assert "2 of 2 stories completed" in (out / "report.md").read_text()


def test_a_method_changed_under_the_same_name_is_refused(tmp_path, models, capsys):
    grid = grid_file(tmp_path, methods='[[methods]]\nname = "Direct"\npipeline = "direct"\n')
    out = tmp_path / "out"
    assert repro(grid, out) == 0
    grid.write_text(grid.read_text() + "set = { temperature = 0.3 }\n")
    capsys.readouterr()
    assert repro(grid, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "was written with other settings for Direct" in err[0]


def test_a_magnet_grid_reports_tables_1_and_2_from_editorial_judgments(tmp_path, models, capsys):
    import shutil

    from agent.testing.story_llm import StoryLLM

    stories = tmp_path / "stories"
    stories.mkdir()
    shutil.copy(ROOT / "agent" / "magnet" / "examples" / "mystery_codicil.toml", stories)
    grid = tmp_path / "m.toml"
    grid.write_text(
        'name = "m"\ndescription = "magnet test"\ntables = "Magnet"\nprofile = "default"\n'
        'stories = "stories"\nlengths = [500]\n'
        '[[methods]]\nname = "Magnet"\npipeline = "magnet"\n\n'
        '[[methods]]\nname = "Single Model"\npipeline = "single"\n'
    )
    models.authors += [StoryLLM()]  # one model writes every story of the grid (the embedded backend)
    out = tmp_path / "out"
    assert repro(grid, out) == 0, capsys.readouterr()
    report = (out / "report.md").read_text()
    assert "## Table 1: editorial annotation counts (mean ± standard deviation)" in report
    assert "| Method | 1 page ↓ |" in report and "| Method | 1 page ↑ |" in report
    assert re.search(r"\| Magnet \| 0\.0 \|", report) and re.search(r"\| Single Model \| 0\.0 \|", report)
    assert re.search(r"\| Magnet \| 1\.0 \|", report.split("## Table 2")[1])  # the rubric's smallest scores
    assert re.search(r"\| Single Model \| annotations \| 500 \| 1 \|", report)  # paired against Magnet
    assert "## Table 3" not in report
    judged = {r.messages[0]["content"][:40] for j in models.judges for r in j.requests}
    assert judged and all(text.startswith("You are an experienced fiction editor") for text in judged)
