"""Extending a run with chapters it was not planned with (``fabula continue``).

The planned new chapters, the configuration they are written with and the record of the
continuation land in one transaction, so an interrupted ``continue`` leaves either the run as it
was or a run that is ``stopped`` with the longer outline (``fabula resume`` writes the new
chapters). The committed chapters, their versions and states are never touched.
"""

from __future__ import annotations

import time
from typing import Any

from agent.store.config import canonical_json, fingerprint
from agent.store.errors import StoreError
from agent.store.runstore import RunStore

CONTINUED_KEY = "continued"
"""Plan key: every continuation of the run, oldest first (from which chapter, how many words, the premise)."""


def extend_run(
    store: RunStore,
    *,
    pipeline: str,
    config: dict[str, Any],
    outline: list[dict[str, Any]],
    record: dict[str, Any],
    plan: dict[str, Any] | None = None,
    model: str | None = None,
    backend: str | None = None,
) -> None:
    """Store ``outline`` (the old chapters' entries unchanged, then the new ones) as the run's
    outline, the run as ``pipeline`` with ``config``, stopped at its last chapter; ``record``
    is appended to :data:`CONTINUED_KEY`; ``plan``: other plan parts to set at the same time; ``model``
    and ``backend``: what the new chapters are written with (None: as recorded)."""
    info = store.info()
    if info.unit_kind != "chapter":
        raise StoreError(f"{store.run_dir} is a run of {info.unit_kind}s; only a book of chapters is continued")
    if len(outline) <= info.last_unit or [c["id"] for c in outline] != list(range(1, len(outline) + 1)):
        raise StoreError("a continuation's outline must number every chapter 1..n and add chapters after the last")
    now = time.time()
    records = store.plans.get(CONTINUED_KEY)
    values = {
        **(plan or {}),
        "outline": outline,
        CONTINUED_KEY: [*(records if isinstance(records, list) else []), {**record, "at": now}],
    }
    with store.db.write() as conn:  # one transaction across the run row and the plan
        conn.execute(
            "UPDATE run SET pipeline = ?, config = ?, fingerprint = ?, status = 'stopped', error = NULL, "
            "finished_at = NULL, target_units = ?, updated_at = ?, model = coalesce(?, model), "
            "backend = coalesce(?, backend) WHERE id = 1",
            (pipeline, canonical_json(config), fingerprint(config), len(outline), now, model, backend),
        )
        conn.executemany(
            "INSERT INTO plan (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE "
            "SET value = excluded.value, updated_at = excluded.updated_at",
            [(key, canonical_json(value), now) for key, value in values.items()],
        )


def continuations(store: RunStore) -> list[dict[str, Any]]:
    """Every continuation recorded, oldest first."""
    value = store.plans.get(CONTINUED_KEY)
    return value if isinstance(value, list) else []
