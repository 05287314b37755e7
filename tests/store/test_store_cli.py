"""The run commands: runs, show, search, export, resume; failures are one line, exit non-zero."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agent import pipelines
from agent.cli import main
from agent.store import RunStore

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_dir(store, write_chapters):
    store.set_target(3)
    store.plans.put("title", "Harbour")
    write_chapters(store, ["The ferryman counted lanterns. Gulls cried.", "Mara found the silver key. It was cold."])
    store.commit_chapter(
        3,
        "Three",
        "Too short.",
        state={"characters": {"Mara": {}}, "past_events": [1, 2]},
        degraded=True,
        degraded_reason="length gate: 2 words, need 2000-3000",
    )
    store.ledger.recorder(_call(100, 60, 7))
    store.ledger.record_tool_call(turn=1, tool="search", arguments={"query": "key"}, result="[]")
    return store.run_dir


def _call(prompt, cached, completion):
    from agent.llm.types import CallRecord

    return CallRecord(
        role="writer",
        backend="endpoint",
        model="m",
        temperature=0.7,
        max_tokens=10,
        schema_name=None,
        prompt_tokens=prompt,
        cached_prompt_tokens=cached,
        completion_tokens=completion,
        latency_s=0.1,
        finish_reason="stop",
    )


def test_show_reports_progress_tokens_and_degraded(run_dir, capsys):
    assert main(["show", str(run_dir)]) == 0
    plain = capsys.readouterr().out
    assert "progress  3/3 chapters" in plain and "tokens" not in plain and "tools" not in plain  # a writer's view
    assert main(["show", str(run_dir), "-v"]) == 0
    out = capsys.readouterr().out
    assert "progress  3/3 chapters" in out
    assert "prompt 100  cached 60  completion 7  cached share 60%" in out
    assert "characters 1, past_events 2" in out
    assert "degraded  chapter 3: length gate: 2 words, need 2000-3000" in out
    assert "tools     search 1" in out
    main(["show", str(run_dir), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["words"] == 16 and data["cached_share"] == 0.6 and data["chapters"] == 3


def test_runs_lists_every_run_and_survives_a_bad_one(run_dir, capsys):
    parent = run_dir.parent
    (parent / "broken").mkdir()
    (parent / "broken" / "run.db").write_bytes(b"not a database")
    assert main(["runs", str(parent)]) == 0
    out = capsys.readouterr().out
    assert "run " in out and "nst" in out and "3/3 ch" in out and " 16 " in out
    assert "broken  error:" in out
    main(["runs", str(parent), "--json"])
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {Path(r["run_dir"]).name for r in rows} == {"run", "broken"}
    # one shape per kind of record: a run in `runs --json` has the keys of `show --json`
    listed = next(r for r in rows if "pipeline" in r)
    main(["show", listed["run_dir"], "--json"])
    shown = json.loads(capsys.readouterr().out)
    assert set(shown) - {"server_probe", "history"} == set(listed)
    assert listed["units_done"] == shown["units_done"] == 3 and listed["target_units"] == 3


def test_search_json_lines(run_dir, capsys):
    assert main(["search", str(run_dir), "silver key", "--json", "-k", "2"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    # at most 2; a window whose centre sentence the first one already shows is left out (#36)
    assert 1 <= len(lines) <= 2 and lines[0]["chapter"] == 2 and "silver key" in lines[0]["text"]
    assert set(lines[0]) == {"chapter", "position", "score", "text"}
    assert main(["search", str(run_dir), 'AND ( "* :']) == 0
    assert "no matches" in capsys.readouterr().out


def test_export_to_file_and_stdout(run_dir, tmp_path, capsys):
    target = tmp_path / "story.json"
    assert main(["export", str(run_dir), "--format", "json", "-o", str(target)]) == 0
    data = json.loads(target.read_text(encoding="utf-8"))
    assert data["chapters"][1]["text"] == "Mara found the silver key. It was cold."
    assert main(["export", str(run_dir), "--format", "md"]) == 0
    assert capsys.readouterr().out.startswith('---\ntitle: "Harbour"\n')


@pytest.mark.parametrize(
    "argv, message",
    [
        (["show", "{missing}"], "no such run directory"),
        (["search", "{empty}", "x"], "not a fabula run"),
        (["export", "{corrupt}"], "not an SQLite database"),
        (["show", "{foreign}"], "some other program"),
        (["resume", "{norunner}"], "no runner is registered for the retired-pipeline pipeline"),
        (["export", "{run}", "-o", "{run}/run.db"], "refusing to overwrite the run database"),
        (["export", "{run}", "-o", "{tmp}/nodir/x.md"], "output folder does not exist"),
        (["search", "{run}", "x", "-k", "0"], "-k must be at least 1"),
        (["search", "{magnet}", "x"], "has no chapters to search"),
        (["resume", "{run}", "--set", "novalue"], "--set needs KEY=VALUE"),
    ],
)
def test_failures_are_one_line(tmp_path, run_dir, capsys, argv, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "run.db").write_bytes(b"\x00" * 100)
    (tmp_path / "foreign").mkdir()
    sqlite3.connect(tmp_path / "foreign" / "run.db").execute("CREATE TABLE t (x)").connection.close()
    (tmp_path / "norunner").mkdir()
    RunStore.create(tmp_path / "norunner", pipeline="retired-pipeline", config={}).close()
    RunStore.create(tmp_path / "magnet", pipeline="magnet", unit_kind="step", config={}).close()
    paths = {
        "missing": tmp_path / "missing",
        "empty": tmp_path / "empty",
        "corrupt": tmp_path / "corrupt",
        "foreign": tmp_path / "foreign",
        "norunner": tmp_path / "norunner",
        "run": run_dir,
        "tmp": tmp_path,
        "magnet": tmp_path / "magnet",
    }
    before = {p: p.read_bytes() for p in tmp_path.rglob("run.db")}
    code = main([a.format(**paths) for a in argv])
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1 and err.startswith("fabula: error: ") and message in err, err
    assert {p: p.read_bytes() for p in tmp_path.rglob("run.db")} == before


def test_resume_cli_refuses_a_changed_config_then_forces(tmp_path, fake, capsys):
    pipelines.start(
        tmp_path / "r",
        "fake",
        {"chapters": 3, "stop_after": 1},
        fake.pipelines.LLMOptions(backend="scripted", model="fake-model"),
    ).close()
    code = main(["resume", str(tmp_path / "r"), "--model", "bigger"])
    err = capsys.readouterr().err
    assert code == 2 and 'llm.model: "fake-model" -> "bigger"' in err and err.count("\n") == 1
    assert main(["resume", str(tmp_path / "r"), "--set", "stop_after=null", "--force"]) == 0
    out = capsys.readouterr().out
    assert "completed at chapter 3 of 3" in out
    assert main(["resume", str(tmp_path / "r")]) == 0
    assert "already completed" in capsys.readouterr().out


def test_the_installed_command_prints_no_traceback(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from agent.cli import main; sys.exit(main())",
            "show",
            str(tmp_path / "nope"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip().startswith("fabula: error: no such run directory")
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
