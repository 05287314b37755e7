"""Opening a run from the command line: every store failure becomes one line."""

from __future__ import annotations

import shutil
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agent.cli.common import loud
from agent.cli.errors import CLIError, database_error
from agent.store import CommitError, RunBusyError, RunStore, StoreError
from agent.store.errors import DiskFullError, ReadOnlyRunError


@contextmanager
def store_errors() -> Iterator[None]:
    """Turn store and SQLite failures into a ``CLIError`` (2: the input is wrong, 1: it broke)."""
    try:
        yield
    except (RunBusyError, CommitError, DiskFullError, ReadOnlyRunError) as exc:
        raise CLIError(str(exc), exit_code=1) from exc
    except StoreError as exc:
        raise CLIError(str(exc)) from exc
    except sqlite3.DatabaseError as exc:
        raise CLIError(database_error(exc), exit_code=1) from exc


@contextmanager
def open_run(path: str, *, readonly: bool = True, pipeline: str | None = None) -> Iterator[RunStore]:
    with store_errors():
        store = RunStore.open(path, readonly=readonly, pipeline=pipeline)
        try:
            yield store
        finally:
            store.close()


def discard_if_unused(out: Path, existed: bool) -> None:
    """After a failed start: a run that spent no model call leaves nothing behind; a run that
    did is kept, marked failed, with its ledger and plan, and ``fabula resume`` continues it
    (minutes of calls and the evidence of why they failed are never deleted)."""
    if existed or not out.exists():
        return
    try:
        with RunStore.open(out, readonly=True) as store:
            calls = store.query("SELECT count(*) FROM llm_calls")[0][0]
    except (StoreError, OSError, sqlite3.Error):
        calls = 0
    if calls:
        print(
            f"fabula: the run is kept in {out} ({calls} model call(s) recorded); fabula resume {out} continues it",
            file=loud(),
        )
        return
    shutil.rmtree(out, ignore_errors=True)


def expand_batches(paths: list[str]) -> list[str]:
    """Run directories with every batch folder (``fabula batch``) replaced by its completed
    stories' runs, in the batch's order; a note on stderr says how many of each batch are used."""
    from agent.batch import BatchStore, is_batch

    out: list[str] = []
    for path in paths:
        if not is_batch(path) or (Path(path) / "run.db").exists():
            out.append(path)
            continue
        with BatchStore.open(path, readonly=True) as batch:
            rows = batch.stories()
            done = [str(batch.run_path(r)) for r in rows if r.status == "completed"]
        print(f"fabula: batch {path}: {len(done)} of {len(rows)} stories completed, those are used", file=sys.stderr)
        out.extend(done)
    return out
