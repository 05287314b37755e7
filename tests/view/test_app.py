"""The web view's pages through Starlette's test client, the read-only guarantee, the host
rule, and ``fabula watch``."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("jinja2")
from starlette.testclient import TestClient

from agent.cli import main
from agent.cli.view_cmd import listen_address
from agent.store import RunStore
from agent.view.app import create_app
from tests.view.runs import MISSING_QUOTE, quotes, wait_for_unit

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "store" / "fake_pipeline.py"


@pytest.fixture(scope="module")
def client(runs_dir):
    return TestClient(create_app(runs_dir))


def _digest(folder: Path) -> dict[str, tuple[str, float]]:
    """The database and its write-ahead log (the -shm file is SQLite's shared lock index,
    which every reader maps; it holds no data). An empty log counts as none: a reader of a WAL
    database creates it when the last writer's close removed it (the test failed alone, and
    wherever xdist ran it first on its worker)."""
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime)
        for p in folder.iterdir()
        if p.name == "run.db" or (p.name == "run.db-wal" and p.stat().st_size > 0)
    }


def test_runs_list_shows_both_runs(client):
    page = client.get("/").text
    assert 'data-run="keeper"' in page and 'data-run="codicil"' in page
    assert "The Bell Keeper" in page and "Test Story" in page and "completed" in page


def test_story_marks_the_degraded_chapter_and_the_judged_passages(client, nst_dir):
    page = client.get("/run/keeper/story").text
    with RunStore.open(nst_dir, readonly=True) as store:
        first, last = quotes(store)
        words = store.chapter(2).text.split()[:6]
    assert re.search(r'<article class="chapter degraded" id="unit-2"', page)
    assert "Degraded: no draft passed the length gate" in page and " ".join(words) in page
    assert f'<mark id="q0-0-0" class="quote" title="consistency: duration_contradictions">{first}</mark>' in page
    assert f">{last}</mark>" in page


def test_state_page_shows_what_changed_per_chapter(client):
    page = client.get("/run/keeper/state").text
    for unit in (1, 2, 3):
        assert f'id="state-{unit}"' in page
    chapter1 = page.split('id="state-1"')[1].split('id="state-2"')[0]
    assert 'data-collection="past_events" data-key="ch1_event_0"' in chapter1
    assert 'data-collection="future_requirements" data-key="promise_1"' in chapter1
    chapter3 = page.split('id="state-3"')[1]
    assert 'class="change added" data-collection="past_events" data-key="ch3_event_0"' in chapter3
    assert "ch1_event_0" not in chapter3.split("<details>")[0]  # only the changes are listed


def test_magnet_state_has_the_world_graph_and_variables_per_step(client, magnet_dir):
    page = client.get("/run/codicil/state").text
    assert '<div class="graph" id="world-graph" tabindex="0" role="region"' in page
    assert 'aria-label="the world graph"' in page
    assert 'data-collection="world_variables" data-key="Ann.acted"' in page  # (subject, attribute) since #9
    at_one = client.get("/run/codicil/state?unit=1").text
    assert "World graph after step 1" in at_one


def test_ledger_has_per_unit_rows_plots_and_tool_calls(client, nst_dir):
    page = client.get("/run/keeper/costs").text
    assert page.count("<svg") == 3 and "Tokens per unit" in page and "Tool calls per unit" in page
    with RunStore.open(nst_dir, readonly=True) as store:
        calls = len(store.ledger.llm_calls())
    assert f"All {calls} calls" in page
    row = re.search(r'<tr data-unit="1">(.*?)</tr>', page, flags=re.S).group(1)
    assert "write 1" in row and "update 1" in row and "finish 1" in row


def test_judgments_link_found_quotes_and_mark_missing_ones(client):
    page = client.get("/run/keeper/judgments").text
    assert page.count('class="quote-link"') == 3
    assert 'href="/run/keeper/story#q0-0-0"' in page
    assert f'<span class="quote-missing">“{MISSING_QUOTE}”</span>' in page
    assert "failed after 1 attempt(s): judge reply was not valid JSON" in page


def test_version_changes_only_when_the_run_does(client):
    one = client.get("/api/version?run=keeper").json()
    assert one == client.get("/api/version?run=keeper").json() and one["last_unit"] == 3
    assert client.get("/run/nothing/story").status_code == 404
    assert client.get("/run/keeper/secrets").status_code == 404


def test_viewing_never_writes_to_the_run(runs_dir, client):
    before = {name: _digest(runs_dir / name) for name in ("keeper", "codicil")}
    for url in (
        "/",
        "/run/keeper/story",
        "/run/keeper/state",
        "/run/keeper/costs",
        "/run/keeper/judgments",
        "/run/codicil/story",
        "/run/codicil/state",
        "/api/version",
        "/api/version?run=codicil",
    ):
        assert client.get(url).status_code == 200, url
    assert {name: _digest(runs_dir / name) for name in ("keeper", "codicil")} == before
    assert client.post("/run/keeper/story").status_code == 405


def test_the_view_binds_to_loopback_unless_a_host_is_given(capsys):
    assert listen_address(None) == "127.0.0.1"
    assert listen_address("::1") == "::1" and capsys.readouterr().err == ""
    assert listen_address("0.0.0.0") == "0.0.0.0"
    assert "anyone who can reach it" in capsys.readouterr().err


def test_an_old_schema_is_refused_not_upgraded(tmp_path, client):
    import sqlite3

    from agent.store.db import APPLICATION_ID

    old = tmp_path / "old"
    old.mkdir()
    conn = sqlite3.connect(old / "run.db")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    before = _digest(old)
    response = TestClient(create_app(old)).get("/run/old/story")
    assert response.status_code == 409 and "never writes" in response.text
    assert _digest(old) == before


def test_watch_prints_a_finished_run_then_returns(nst_dir, capsys):
    assert main(["watch", str(nst_dir), "--from", "3"]) == 0
    out = capsys.readouterr()
    assert "## Chapter 3\n" in out.out and "Chapter 3: Chapter 3" not in out.out and "Chapter 1" not in out.out
    assert "completed at chapter 3 of 3" in out.err


def test_watch_follows_chapters_as_a_run_commits_them(tmp_path):
    run_dir = tmp_path / "live"
    writer = subprocess.Popen([sys.executable, str(FAKE), "start", str(run_dir), "3", "0.6"], cwd=ROOT)
    try:
        wait_for_unit(run_dir, 0)
        watcher = subprocess.run(
            [sys.executable, "-m", "agent.cli", "watch", str(run_dir), "--interval", "0.1"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        writer.wait(timeout=60)
    assert watcher.returncode == 0, watcher.stderr
    assert [int(n) for n in re.findall(r"^## Chapter (\d+)", watcher.stdout, flags=re.M)] == [1, 2, 3]
    assert "silver key of chapter 3" in watcher.stdout and "completed at chapter 3 of 3" in watcher.stderr
