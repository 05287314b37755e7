"""Opening runs strictly read-only (the web view, ``fabula watch``), and the runs in a folder.

``RunStore.open`` upgrades an older schema in place; a viewer must never write, so this opens
the database with ``mode=ro`` and ``query_only`` and refuses a schema it would have to upgrade.
"""

from __future__ import annotations

from pathlib import Path

from agent.store.db import APPLICATION_ID, connect, looks_like_sqlite
from agent.store.errors import NotARunError, StoreError
from agent.store.migrations import LATEST, schema_version
from agent.store.paths import DB_NAME, resolve_run_dir
from agent.store.reports.batches import is_batch, read_batch
from agent.store.runstore import RunStore


def open_readonly(run_dir: str | Path) -> RunStore:
    """A store over a read-only connection; refuses foreign files and schemas other than the latest."""
    folder = resolve_run_dir(run_dir)
    db = folder / DB_NAME
    if not looks_like_sqlite(db):
        raise NotARunError(f"{db} is not an SQLite database")
    conn = connect(db, readonly=True)
    try:
        conn.execute("PRAGMA query_only = ON")
        if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
            raise NotARunError(f"{db} is not a fabula run")
        version = schema_version(conn)
        if version != LATEST:
            raise StoreError(
                f"{db} has schema version {version}, this fabula reads {LATEST}; "
                "the view never writes, so upgrade it once with `fabula show` (or use a newer fabula)"
            )
    except BaseException:
        conn.close()
        raise
    return RunStore(folder, conn, readonly=True)


class RunIndex:
    """The runs the view serves: ``root`` itself if it is a run, else the runs directly inside
    it (looked up again on every request, so runs started later appear)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).expanduser().resolve()
        if not self.root.is_dir():
            raise StoreError(f"no such folder: {root}")

    def runs(self) -> dict[str, Path]:
        if (self.root / DB_NAME).is_file():
            return {self.root.name: self.root}
        return {p.name: p for p in sorted(self.root.iterdir()) if p.is_dir() and (p / DB_NAME).is_file()}

    def batches(self) -> dict[str, Path]:
        """Batch folders: ``root`` itself if it is one, else those directly inside it."""
        if is_batch(self.root):
            return {self.root.name: self.root}
        return {p.name: p for p in sorted(self.root.iterdir()) if p.is_dir() and is_batch(p)}

    def path(self, name: str) -> Path | None:
        """A run by its name: a run of the folder, or ``BATCH/STORY`` for a story of a batch
        inside it (only names the index lists, so no name reaches outside ``root``)."""
        found = self.runs().get(name)
        if found is not None or "/" not in name:
            return found
        batch, _, story = name.partition("/")
        folder = self.batches().get(batch)
        if folder is None or folder == self.root:
            return None
        runs = {s.run_dir: folder / s.run_dir for s in read_batch(folder).stories}
        path = runs.get(story)
        if path is None or not path.resolve().is_relative_to(folder) or not (path / DB_NAME).is_file():
            return None
        return path
