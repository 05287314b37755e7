"""A writer's changes to a run's plan (the outline, the book's title and author), kept with what they replaced.

Each change is one transaction: the new values and a record in the plan's ``plan_edits`` list holding
the previous value of every key it changed, so an edited outline can be traced and put back.
"""

from __future__ import annotations

import time
from typing import Any

from agent.store.runstore import RunStore

EDITS_KEY = "plan_edits"


def revise_plan(store: RunStore, values: dict[str, Any], *, by: str, also: dict[str, Any] | None = None) -> list[str]:
    """Store the ``values`` that differ from the plan; returns the keys changed (none: nothing stored).

    ``by`` names the command (``outline``, ``export``), kept in the edit record; ``also``: plan parts
    stored in the same transaction that are no edit (the record of the command that made it)."""
    plan = store.plans.all()
    changed = {k: v for k, v in values.items() if plan.get(k) != v}
    if not changed:
        if also:
            store.plans.update(also)
        return []
    record = {"at": time.time(), "by": by, "previous": {k: plan.get(k) for k in changed}}
    store.plans.update({**(also or {}), **changed, EDITS_KEY: [*plan.get(EDITS_KEY, []), record]})
    return sorted(changed)


def edits(store: RunStore) -> list[dict[str, Any]]:
    """Every recorded edit, oldest first."""
    value = store.plans.get(EDITS_KEY)
    return value if isinstance(value, list) else []
