"""``fabula reconcile RUN``: after a writer's edit of chapter K, the story's state follows the edit.

Three steps, each stored as done so running it again continues and asks nothing twice: chapter K
and every later chapter's state re-derived in order (``agent.nst.chapter.rederive``); every later
chapter not locked judged against the state after K (``agent.nst.revise.reconcile_judge``); the
unwritten chapters' outline re-planned (``agent.nst.revise.replan``). Chapters are never rewritten;
``--lock K..M`` marks approved ones. Each reconcile is recorded in the plan (``reconciles``).
The steps in full: docs/design/reconcile.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent import pipelines
from agent.errors import InputError
from agent.llm import LLM, EndpointUnavailableError, LLMError
from agent.llm.options import LLMOptions
from agent.nst.chapter.rederive import rederive_nst
from agent.nst.chapter.sizing import run_budget
from agent.nst.chapter.update import ASK_FROM_BOOK
from agent.nst.config import NstConfig
from agent.nst.plan.planner import PlanError
from agent.nst.revise.reconcile_judge import judge_chapter
from agent.nst.revise.replan import replan
from agent.nst.state import NarrativeState
from agent.run_context import RunContext
from agent.store import RunStore
from agent.store.lineage.fork import STALE_KEY
from agent.store.snapshots import ChapterSnapshot
from agent.store.writer.locks import LOCKED_KEY, locked
from agent.store.writer.plan_edits import revise_plan

RECONCILES_KEY = "reconciles"


@dataclass(frozen=True)
class Pending:
    """What a reconcile will work on: the record (new or left by an interrupted one) and the locks."""

    record: dict[str, Any]
    locks: list[int]
    resumed: bool


def records(store: RunStore) -> list[dict[str, Any]]:
    value = store.plans.get(RECONCILES_KEY)
    return value if isinstance(value, list) else []


def unfinished(store: RunStore) -> Pending | None:
    """The reconcile an interruption left unfinished (``fabula resume`` finishes it first), if any."""
    earlier = records(store)
    if earlier and earlier[-1].get("status") == "running":
        return Pending(earlier[-1], list(earlier[-1].get("locked", [])), True)
    return None


def prepare(store: RunStore, *, start: int | None = None, lock: list[int] | None = None) -> Pending:
    """The reconcile to run, or ``InputError`` (one line) saying why there is none; writes nothing."""
    info = store.info()
    if info.pipeline != "nst" or info.unit_kind != "chapter":
        raise InputError(
            f"{store.run_dir} is a {info.pipeline} run; fabula reconcile works on an NstAgent run (its narrative state)"
        )
    if not NstConfig.coerce(info.config).state:
        raise InputError(f"{store.run_dir} keeps no narrative state (--no-state): nothing to reconcile")
    last = info.last_unit
    for chapter in lock or []:
        if not 1 <= chapter <= last:
            raise InputError(f"--lock: chapter {chapter} is not written (chapters 1 to {last} are)")
    earlier = records(store)
    if earlier and earlier[-1].get("status") == "running" and start in (None, earlier[-1]["from"]):
        locks = sorted(set(earlier[-1].get("locked", [])) | set(lock or []))
        return Pending(earlier[-1], locks, True)
    if start is None:
        stale = store.plans.get(STALE_KEY)
        if not isinstance(stale, dict) or "unit" not in stale:
            raise InputError(
                f"{store.run_dir} has no edit to reconcile (no chapter was edited since the last "
                "reconcile); name one with --from K"
            )
        start = int(stale["unit"])
    if not 1 <= start <= last:
        raise InputError(f"--from must be a written chapter (1 to {last}), not {start}")
    locks = sorted(locked(store) | set(lock or []))
    record = {
        "id": len(earlier) + 1,
        "from": start,
        "last": last,
        "status": "running",
        "started_at": time.time(),
        "rederived": [],
        "judged": {},
        "replanned": None,
        "locked": locks,
    }
    return Pending(record, locks, False)


@dataclass
class Reconciled:
    """What one reconcile did, for the report."""

    record: dict[str, Any]
    stopped: str | None = None
    calls: int = 0


Line = Callable[[str], None]


def _save(store: RunStore, record: dict[str, Any], **also: Any) -> None:
    others = [r for r in records(store) if r.get("id") != record["id"]]
    store.plans.update({RECONCILES_KEY: [*others, record], **also})


def _state_after(store: RunStore, index: int) -> NarrativeState:
    return NarrativeState.from_json(ChapterSnapshot.read(store.state(index)).narrative)


def _done(store: RunStore, index: int, rid: int) -> bool:
    rederived = (store.state(index) or {}).get("rederived") or {}
    chapter = store.chapter(index)
    return rederived.get("reconcile") == rid and chapter is not None and rederived.get("version") == chapter.version


def _rederive_all(ctx: RunContext[NstConfig], record: dict[str, Any], say: Line) -> str | None:
    store, rid = ctx.store, record["id"]
    for index in range(record["from"], record["last"] + 1):
        if _done(store, index, rid):
            continue
        with ctx.unit(index):
            # the edited chapter is asked as edited, a later one as the text it is
            result = rederive_nst(
                ctx, index, mark={"reconcile": rid}, **({"ask": ASK_FROM_BOOK} if index > record["from"] else {})
            )
        if not result.ok:
            return f"chapter {index}: {result.what}"
        record["rederived"] = sorted({*record["rederived"], index})
        say(f"reconcile: chapter {index}: state re-derived from its text")
    _save(store, record)
    return None


def _judge_all(ctx: RunContext[NstConfig], record: dict[str, Any], locks: list[int], say: Line) -> None:
    store, edited = ctx.store, record["from"]
    state = _state_after(store, edited)
    budget = run_budget(ctx)
    for index in range(edited + 1, record["last"] + 1):
        if str(index) in record["judged"]:
            continue
        if index in locks:
            record["judged"][str(index)] = {"locked": True, "contradictions": []}
            say(f"reconcile: chapter {index}: locked (approved), not judged for a rewrite")
        else:
            chapter = store.chapter(index)
            assert chapter is not None
            with ctx.unit(index):
                try:
                    found = judge_chapter(ctx.llm, budget, ctx.config, state, edited, chapter)
                    record["judged"][str(index)] = {"contradictions": found}
                except EndpointUnavailableError:
                    raise
                except LLMError as exc:
                    record["judged"][str(index)] = {
                        "error": (str(exc).splitlines() or ["failed"])[0][:200],
                        "contradictions": [],
                    }
            n = len(record["judged"][str(index)]["contradictions"])
            say(f"reconcile: chapter {index}: {n} contradiction(s) of the new state")
        _save(store, record)


def _replan(ctx: RunContext[NstConfig], record: dict[str, Any], say: Line) -> str | None:
    store = ctx.store
    outline = store.plans.get("outline") or []
    written, todo = outline[: record["last"]], outline[record["last"] :]
    if record["replanned"] is not None:
        return None
    if not todo:
        record["replanned"] = []
        _save(store, record)
        return None
    with ctx.unit(0):
        try:
            new = replan(
                ctx.llm,
                run_budget(ctx),
                ctx.config,
                written=written,
                todo=todo,
                state=_state_after(store, record["last"]),
                edited=record["from"],
            )
        except PlanError as exc:
            return f"the outline was not re-planned: {exc}"
    record["replanned"] = [c["id"] for c in new]
    others = [r for r in records(store) if r.get("id") != record["id"]]
    revise_plan(store, {"outline": [*written, *new]}, by="reconcile", also={RECONCILES_KEY: [*others, record]})
    say(f"reconcile: chapters {todo[0]['id']}-{todo[-1]['id']} re-planned from the new state")
    return None


def reconcile(
    store: RunStore, pending: Pending, llm: LLMOptions, model: LLM, *, say: Line, events: Any = None
) -> Reconciled:
    """Run (or continue) the reconcile ``pending`` on ``model``, in a ``reconcile`` session that
    leaves the run's status as it found it."""
    record = pending.record
    record["locked"] = pending.locks
    info = store.info()
    config = pipelines.get(info.pipeline).typed(info.config)
    result = Reconciled(record)
    with store.sessions.hold("reconcile", transport=llm.transport(), keep_status=True):
        llm.attach_run(model, store)
        _save(store, record, **({LOCKED_KEY: pending.locks} if pending.locks else {}))
        with RunContext(store, config, llm=model, events=events) as ctx:
            start = ctx.calls
            try:
                result.stopped = _rederive_all(ctx, record, say)
                if result.stopped is None:
                    _judge_all(ctx, record, pending.locks, say)
                    result.stopped = _replan(ctx, record, say)
            except EndpointUnavailableError as exc:
                result.stopped = f"the server is unavailable ({(str(exc).splitlines() or [''])[0]})"
            result.calls = ctx.calls - start
        if result.stopped is None:
            record.update(status="done", finished_at=time.time())
            _save(store, record)
            store.plans.delete(STALE_KEY)  # every written chapter's state follows its text again
    return result
