"""Schema migrations: from empty and from every earlier version, data kept."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from agent.store import RunStore
from agent.store.db import APPLICATION_ID, connect
from agent.store.migrations import LATEST, MIGRATIONS, migrate, schema_version


def test_from_empty_reaches_latest(tmp_path):
    conn = connect(tmp_path / "x.db")
    assert migrate(conn) == list(range(1, LATEST + 1))
    assert schema_version(conn) == LATEST
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert [r[0] for r in conn.execute("SELECT version FROM migrations ORDER BY version")] == list(range(1, LATEST + 1))
    assert migrate(conn) == []  # idempotent
    conn.close()


def _seed(conn: sqlite3.Connection, version: int) -> None:
    """Rows that are valid at schema ``version`` (a run with one chapter, and more as tables appear)."""
    now = time.time()
    conn.execute(
        "INSERT INTO run (id, pipeline, unit_kind, config, fingerprint, last_unit, created_at, updated_at) "
        "VALUES (1, 'nst', 'chapter', '{\"chapters\": 2}', 'fp', 1, ?, ?)",
        (now, now),
    )
    conn.execute(
        "INSERT INTO chapters (idx, title, text, words, created_at, updated_at) "
        "VALUES (1, 'One', 'The old lighthouse keeper waved.', 5, ?, ?)",
        (now, now),
    )
    conn.execute("INSERT INTO states (unit, state, created_at) VALUES (1, '{\"k\": 1}', ?)", (now,))
    if version >= 2:
        from agent.store.search import index_chapter

        index_chapter(conn, 1, "The old lighthouse keeper waved.")
    if version >= 3:
        conn.execute(
            "INSERT INTO tool_calls (unit, turn, tool, arguments, ok, created_at) VALUES (1, 1, 'write', '{}', 1, ?)",
            (now,),
        )


@pytest.mark.parametrize("start", range(1, LATEST))
def test_from_every_earlier_version(tmp_path, start):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    conn = connect(run_dir / "run.db")
    migrate(conn, target=start)
    assert schema_version(conn) == start
    _seed(conn, start)
    conn.close()

    with RunStore.open(run_dir, readonly=True) as store:  # a read-only open upgrades first
        assert store.schema_version() == LATEST
        assert store.info().config == {"chapters": 2}
        assert store.chapter(1).text == "The old lighthouse keeper waved."
        assert store.state() == {"k": 1}
    with RunStore.open(run_dir) as store:
        # chapters written before the index existed (start == 1) are indexed by the upgrade
        assert [h.chapter for h in store.search("lighthouse")] == [1]
        store.commit_chapter(2, "Two", "A second chapter.", state={"k": 2})
        assert store.next_unit() == 3


def test_migrations_are_append_only_names():
    names = [m.__name__ for m in MIGRATIONS]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert all(name.startswith(f"m{i:03d}_") for i, name in enumerate(names, 1))


def test_a_failing_migration_leaves_the_previous_version(tmp_path, monkeypatch):
    conn = connect(tmp_path / "x.db")
    migrate(conn, target=2)

    def broken(c):
        c.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("boom")

    monkeypatch.setattr("agent.store.migrations.MIGRATIONS", [*MIGRATIONS[:2], broken])
    with pytest.raises(RuntimeError):
        migrate(conn, target=3)
    assert schema_version(conn) == 2
    assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'half_done'").fetchone()[0] == 0
    conn.close()


def test_new_run_records_config_fingerprint(tmp_path):
    with RunStore.create(tmp_path / "r", pipeline="magnet", unit_kind="step", config={"b": 1, "a": [1, 2]}) as s:
        info = s.info()
        assert info.pipeline == "magnet" and info.unit_kind == "step" and info.status == "created"
        from agent.store import fingerprint

        assert info.fingerprint == fingerprint({"a": [1, 2], "b": 1})
        assert json.loads(s.query("SELECT config FROM run")[0][0]) == {"a": [1, 2], "b": 1}


def test_two_connections_migrating_at_once_apply_each_migration_once(tmp_path):
    import threading

    path = tmp_path / "x.db"
    connect(path).close()
    results: list[list[int]] = []
    errors: list[BaseException] = []

    def worker():
        conn = connect(path)
        try:
            results.append(migrate(conn))
        except BaseException as exc:  # pragma: no cover - the failure being tested for
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(v for r in results for v in r) == list(range(1, LATEST + 1))
