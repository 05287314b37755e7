"""Opening runs: missing, corrupt, foreign, too new, wrong pipeline, busy; nothing modified."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from agent.store import (
    NotARunError,
    RunBusyError,
    RunNotFoundError,
    RunStore,
    SchemaTooNewError,
    StoreError,
    WrongPipelineError,
)
from agent.store.migrations import LATEST
from agent.store.paths import check_output_file, inside


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_missing_run_dir_and_missing_db(tmp_path):
    with pytest.raises(RunNotFoundError, match="no such run directory"):
        RunStore.open(tmp_path / "nope")
    with pytest.raises(RunNotFoundError, match="not a fabula run"):
        RunStore.open(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunNotFoundError, match="not a directory"):
        RunStore.open(tmp_path / "file")


@pytest.mark.parametrize("content", [b"", b"garbage" * 100, b"SQLite format 3\x00" + b"\xff" * 4000])
def test_corrupt_database_is_refused_untouched(tmp_path, content):
    (tmp_path / "run.db").write_bytes(content)
    before = _digest(tmp_path / "run.db")
    with pytest.raises(NotARunError):
        RunStore.open(tmp_path)
    assert _digest(tmp_path / "run.db") == before


def test_foreign_sqlite_database_is_refused_untouched(tmp_path):
    conn = sqlite3.connect(tmp_path / "run.db")
    conn.execute("CREATE TABLE notes (x)")
    conn.commit()
    conn.close()
    before = _digest(tmp_path / "run.db")
    with pytest.raises(NotARunError, match="some other program"):
        RunStore.open(tmp_path)
    with pytest.raises(NotARunError):
        RunStore.open(tmp_path, readonly=False)
    assert _digest(tmp_path / "run.db") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.db"]


def test_newer_schema_is_refused_untouched(store):
    store.close()
    conn = sqlite3.connect(store.path)
    conn.execute(f"PRAGMA user_version = {LATEST + 1}")
    conn.close()
    before = _digest(store.path)
    with pytest.raises(SchemaTooNewError, match="upgrade fabula"):
        RunStore.open(store.run_dir)
    assert _digest(store.path) == before


def test_wrong_pipeline(store):
    with pytest.raises(WrongPipelineError, match="is a nst run, not magnet"):
        RunStore.open(store.run_dir, pipeline="magnet")
    RunStore.open(store.run_dir, pipeline="nst").close()


def test_create_refuses_an_existing_run(store):
    with pytest.raises(StoreError, match="already holds a run"):
        RunStore.create(store.run_dir, pipeline="nst", config={})


def test_one_writer_session_at_a_time(store):
    other = RunStore.open(store.run_dir)
    with store.sessions.hold("start"):
        assert store.live_status() == "running"
        with pytest.raises(RunBusyError), other.sessions.hold("resume"):
            pass
    assert store.info().status == "stopped"
    other.close()


def test_session_outcomes(store):
    with pytest.raises(RuntimeError), store.sessions.hold("start"):
        raise RuntimeError("the server is gone\nsecond line")
    assert (store.info().status, store.info().error) == ("failed", "the server is gone")
    with store.sessions.hold("resume"):
        store.finish()
    assert store.info().status == "completed" and store.info().finished_at
    rows = store.query("SELECT kind, outcome FROM sessions ORDER BY id")
    assert [tuple(r) for r in rows] == [("start", "failed"), ("resume", "completed")]


def test_paths_cannot_escape_the_run_dir(tmp_path):
    assert inside(tmp_path, "a/b.txt") == (tmp_path / "a" / "b.txt").resolve()
    for bad in ("../x", "/etc/passwd", "a/../../x"):
        with pytest.raises(StoreError):
            inside(tmp_path, bad)
    (tmp_path / "link").symlink_to("/tmp")
    with pytest.raises(StoreError, match="escapes"):
        inside(tmp_path, "link/x")


def test_output_file_checks(store, tmp_path):
    with pytest.raises(StoreError, match="run database"):
        check_output_file(store.path)
    with pytest.raises(StoreError, match="directory"):
        check_output_file(tmp_path)
    with pytest.raises(StoreError, match="does not exist"):
        check_output_file(tmp_path / "no" / "x.md")
    assert check_output_file(tmp_path / "x.md") == (tmp_path / "x.md").resolve()


def test_run_db_symlinked_outside_is_refused(tmp_path, store):
    run = tmp_path / "evil"
    run.mkdir()
    (run / "run.db").symlink_to(store.path)
    with pytest.raises(NotARunError, match="inside the run directory"):
        RunStore.open(run)
