"""Opening a run from the command line: every store failure becomes one line."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from agent.cli.errors import CLIError
from agent.store import CommitError, RunBusyError, RunStore, StoreError


@contextmanager
def store_errors() -> Iterator[None]:
    """Turn store and SQLite failures into a ``CLIError`` (2: the input is wrong, 1: it broke)."""
    try:
        yield
    except (RunBusyError, CommitError) as exc:
        raise CLIError(str(exc), exit_code=1) from exc
    except StoreError as exc:
        raise CLIError(str(exc)) from exc
    except sqlite3.DatabaseError as exc:
        raise CLIError(f"the run database is damaged or unreadable: {exc}", exit_code=1) from exc


@contextmanager
def open_run(path: str, *, readonly: bool = True, pipeline: str | None = None) -> Iterator[RunStore]:
    with store_errors():
        store = RunStore.open(path, readonly=readonly, pipeline=pipeline)
        try:
            yield store
        finally:
            store.close()
