"""Review: a run that stops after each committed chapter (or every K) until the writer approves it.

Three plan records: ``review`` (the setting: ``every`` K chapters, whether the outline is reviewed
first, and ``from``: the first unit reviewed), ``in_review`` (where the run stands waiting: the unit, 0
for the outline), and ``room_actions`` (every writer's action on the run: who, when, what; approvals,
revisions and edits from the CLI or the view). Kept in the plan, not the configuration: reviewing
changes how a run is driven, not what it writes, so a resume never sees it as a changed setting.
"""

from __future__ import annotations

import getpass
import os
import time
from typing import Any

from agent.errors import InputError
from agent.store.runstore import RunStore

REVIEW_KEY = "review"
IN_REVIEW_KEY = "in_review"
ACTIONS_KEY = "room_actions"
MAX_ACTIONS = 10_000
"""The action log keeps the latest this many (a writer's lifetime of clicks on one book)."""
MAX_EVERY = 10_000


def review_every(every: int) -> dict[str, Any]:
    """The setting of ``--review`` (every chapter) or ``--review-every K``; a K out of range is refused."""
    if not 1 <= every <= MAX_EVERY:
        raise InputError(f"--review-every {every}: give K from 1 to {MAX_EVERY}")
    return {"every": every, "outline": True}


def set_review(store: RunStore, review: dict[str, Any] | None) -> None:
    """Turn review on (the record) or off (None)."""
    if review is None:
        store.plans.delete(REVIEW_KEY)
    else:
        store.plans.put(REVIEW_KEY, review)


def review_setting(store: RunStore) -> dict[str, Any] | None:
    record = store.plans.get(REVIEW_KEY)
    return record if isinstance(record, dict) else None


def in_review(store: RunStore) -> dict[str, Any] | None:
    """Where the run waits for the writer (``unit``: the chapter, 0: the outline), or None."""
    record = store.plans.get(IN_REVIEW_KEY)
    return record if isinstance(record, dict) else None


def _approved(store: RunStore, unit: int) -> bool:
    return any(a.get("what") == "approve" and a.get("unit") == unit for a in actions(store))


def pause_after(store: RunStore, unit: int) -> bool:
    """After committing ``unit``: enter review and return True when the setting asks for it here. A resume
    asks it again of the last committed unit (:func:`owed_review`)."""
    review = review_setting(store)
    if (
        review is None
        or unit < int(review.get("from", 1))
        or unit % int(review.get("every", 1)) != 0
        or _approved(store, unit)
    ):
        return False
    store.plans.put(IN_REVIEW_KEY, {"unit": unit, "at": time.time()})
    return True


def owed_review(store: RunStore) -> bool:
    """Before a resumed run writes on: the review its last committed unit owes, entered (True) when a run
    stopped between that unit's commit and its review (killed, a crash). Units committed before review was
    turned on (its ``from``) owe none; an approved one owes none."""
    last = store.info().last_unit
    return last > 0 and in_review(store) is None and pause_after(store, last)


def with_start(store: RunStore, review: dict[str, Any]) -> dict[str, Any]:
    """``review`` as given to a run that may have units: reviews begin at its next unit (those committed
    already were not waiting for the writer); once on, they keep where they began."""
    before = review_setting(store)
    start = before.get("from", 1) if before is not None else store.info().last_unit + 1
    return {**review, "from": start}


def pause_for_outline(store: RunStore) -> bool:
    """Before the first chapter: enter review of the outline (True) when the setting asks for it."""
    review = review_setting(store)
    if review is None or not review.get("outline") or store.info().last_unit > 0 or _approved(store, 0):
        return False
    store.plans.put(IN_REVIEW_KEY, {"unit": 0, "at": time.time()})
    return True


def record_action(
    store: RunStore, what: str, *, unit: int | None = None, by: str | None = None, via: str = "cli", **details: Any
) -> dict[str, Any]:
    """Append one writer's action to the run's log (who, when, what, through which door). A command the
    view runs for the writer says so through ``FABULA_ACTION_VIA`` and ``FABULA_ACTION_BY``."""
    via = os.environ.get("FABULA_ACTION_VIA", via)
    entry = {
        "what": what,
        "unit": unit,
        "by": by or os.environ.get("FABULA_ACTION_BY") or _who(),
        "via": via,
        "at": time.time(),
        **details,
    }
    log = actions(store)[-(MAX_ACTIONS - 1) :]
    store.plans.put(ACTIONS_KEY, [*log, entry])
    return entry


def actions(store: RunStore) -> list[dict[str, Any]]:
    log = store.plans.get(ACTIONS_KEY)
    return log if isinstance(log, list) else []


def approve(store: RunStore, *, by: str | None = None, via: str = "cli") -> dict[str, Any]:
    """The writer approves what the run waits on: the record leaves review and the approval is logged."""
    waiting = in_review(store)
    if waiting is None:
        raise InputError(f"{store.run_dir} is not in review: nothing to approve")
    entry = record_action(store, "approve", unit=int(waiting["unit"]), by=by, via=via)
    store.plans.delete(IN_REVIEW_KEY)
    return entry


def next_steps(run_dir: str, waiting: dict[str, Any]) -> list[str]:
    """The commands that go on from a review, as every door (runs, show, the view) shows them."""
    unit = int(waiting["unit"])
    if unit == 0:
        return [f"fabula outline {run_dir} --edit", f"fabula approve {run_dir}"]
    return [
        f"fabula approve {run_dir}",
        f'fabula revise {run_dir} --chapter {unit} --note "..."',
        f"fabula edit {run_dir} --chapter {unit}",
        f"fabula lint {run_dir} --chapter {unit}",
    ]


def describe(waiting: dict[str, Any]) -> str:
    unit = int(waiting["unit"])
    return "in review: the outline" if unit == 0 else f"in review: chapter {unit}"


def _who() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
