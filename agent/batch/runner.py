"""Writing a batch: every story through the pipelines' own start and resume, K at a time.

Each story is an ordinary run in its own folder, started with :func:`agent.pipelines.start`
or continued with :func:`agent.pipelines.resume` (from its last committed unit), so ``fabula
show/export/resume`` work on it and a kill loses at most the units in flight. K stories run at
once in threads against the same endpoint, each with its own model client (a client carries
its run's recorders, so it is never shared between stories at the same time); the server
batches their requests. The embedded model is loaded once and writes one story at a time.

A story that fails is recorded (its run is kept) and the others go on; the next run of the
batch retries it. Stopping: Ctrl-C (or ``stop``) lets every story end at its next model call,
each resumable; a second Ctrl-C leaves at once (like a kill: at most the units in flight lost).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent import pipelines
from agent.batch.store import BatchStore, Stats, StoryRow, is_batch
from agent.batch.stories import StorySpec, plan_stories
from agent.batch.streak import FailureStreak
from agent.batch.tracker import Sink, Snapshot, Tracker
from agent.errors import InputError
from agent.llm.options import LLMOptions, ModelFlags, StoredModel, resolve
from agent.run_context import Event
from agent.store import RunStore
from agent.store.paths import DB_NAME

if TYPE_CHECKING:
    from agent.llm import LLM

MAX_CONCURRENCY = 256


@dataclass(frozen=True)
class BatchResult:
    """How a batch session ended: every story's row and this session's figures."""

    folder: Path
    stories: list[StoryRow]
    snapshot: Snapshot
    wall_s: float
    concurrency: int
    notes: list[str] = field(default_factory=list)
    stopped_early: str | None = None
    """Why the batch stopped starting stories (several in a row failed with one cause)."""

    def count(self, status: str) -> int:
        return sum(1 for s in self.stories if s.live_status == status)

    @property
    def complete(self) -> bool:
        return all(s.status == "completed" for s in self.stories)


def stored_llm(llm: LLMOptions) -> dict[str, Any]:
    """What the batch keeps about its model: backend, model, thinking, and the endpoint when it
    holds no credentials (so ``batch resume`` finds the server again without flags)."""
    from agent.llm.options import redact_url

    endpoint = llm.endpoint if llm.endpoint and redact_url(llm.endpoint) == llm.endpoint else None
    servers = {r.name: r.endpoint for r in llm.roles if r.endpoint and redact_url(r.endpoint) == r.endpoint}
    return {**llm.fingerprinted(), "endpoint": endpoint, **({"role_endpoints": servers} if servers else {})}


def stored_batch_model(stored: dict[str, Any], pipeline: str) -> StoredModel:
    """What a batch recorded about its model (its roles' models and servers too, ``pipeline``'s)."""
    described = pipelines.known(pipeline)
    transport = {"endpoint": stored.get("endpoint"), "role_endpoints": stored.get("role_endpoints")}
    return StoredModel.from_record(stored, transport, model_roles=described.model_roles if described else None)


def create(
    folder: str | os.PathLike[str],
    pipeline: str,
    stories: Sequence[StorySpec],
    llm: LLMOptions,
    *,
    concurrency: int = 1,
) -> BatchStore:
    """A new batch database in ``folder`` holding ``stories`` (nothing is written yet)."""
    check_concurrency(concurrency)
    return BatchStore.create(folder, pipeline=pipeline, llm=stored_llm(llm), concurrency=concurrency, stories=stories)


def check_concurrency(concurrency: int) -> None:
    if not 1 <= concurrency <= MAX_CONCURRENCY:
        raise InputError(f"--concurrency must be between 1 and {MAX_CONCURRENCY}, got {concurrency}")


def effective_llm(stored: dict[str, Any], given: LLMOptions | None, pipeline: str = "") -> LLMOptions:
    """The batch's model: what the caller chose (the CLI's resolved choice, or a few fields from
    Python), the rest as the batch stored it (``agent.llm.options.resolve``, the one merge)."""
    record = stored_batch_model(stored, pipeline)
    return resolve(ModelFlags.of(given) if given is not None else None, stored=record)


def read_stats(store: RunStore) -> Stats:
    info = store.info()
    calls, prompt, cached, completion = store.query(
        "SELECT count(*), coalesce(sum(prompt_tokens), 0), coalesce(sum(cached_prompt_tokens), 0), "
        "coalesce(sum(completion_tokens), 0) FROM llm_calls"
    )[0]
    return Stats(store.words_written(), info.last_unit, info.target_units, calls, prompt, cached, completion)


def one_line(exc: BaseException) -> str:
    from agent.errors import FabulaError

    text = (str(exc).strip().splitlines() or [""])[0]
    return text if isinstance(exc, FabulaError) and text else f"{type(exc).__name__}: {text}".rstrip(": ")


class _Story:
    """One story's writing: the event sink of its run and the bookkeeping around it."""

    def __init__(self, batch: BatchStore, row: StoryRow, tracker: Tracker, stop: threading.Event) -> None:
        self.batch, self.row, self.tracker, self.stop = batch, row, tracker, stop
        self.path = batch.run_path(row)

    def __call__(self, event: Event) -> None:
        self.tracker.event(self.row.key, event)
        if event.kind == "committed":
            self.batch.record_stats(
                self.row.key, Stats(words=event.words, units=event.unit or 0, target_units=event.units)
            )
        if self.stop.is_set():
            raise KeyboardInterrupt  # stop at this call: what is committed stays, the run resumes

    def write(
        self, pipeline: str, llm: LLMOptions, model: LLM | None, force: bool, streak: FailureStreak | None = None
    ) -> str:
        """Start or continue the story; returns its status (completed, failed, stopped)."""
        key = self.row.key
        self.batch.mark_started(key)
        self.tracker.started(key)
        status, error = "failed", None
        try:
            if (self.path / DB_NAME).exists() and _never_started(self.path):
                _remove_run_files(self.path)  # killed while its run was being created: nothing in it
            if (self.path / DB_NAME).exists():
                with RunStore.open(self.path) as store:
                    if store.info().status != "completed":
                        pipelines.resume(store, llm=llm, force=force, events=self, model=model)
                    status, error = self._outcome(store)
            else:
                store = pipelines.start(self.path, pipeline, self.row.config, llm, events=self, model=model)
                with store:
                    status, error = self._outcome(store)
        except KeyboardInterrupt:
            status = "stopped"
            raise
        except Exception as exc:  # a story's failure is recorded; the batch goes on
            status, error = "failed", one_line(exc)
        finally:
            words = self._refresh()
            self.batch.mark_ended(key, status, error=error)
            self.tracker.ended(key, status, words, error)
            if streak is not None:
                streak.record(status, error)
        return status

    def _outcome(self, store: RunStore) -> tuple[str, str | None]:
        info = store.info()
        if info.status == "completed":
            return "completed", None
        return "failed", info.error or f"the run ended {info.status} before its last unit"

    def _refresh(self) -> int:
        """Copy the run's figures into the batch database; the words written."""
        if not (self.path / DB_NAME).exists():
            return 0
        try:
            with RunStore.open(self.path, readonly=True) as store:
                stats = read_stats(store)
        except Exception:
            return self.row.words
        self.batch.record_stats(self.row.key, stats)
        return stats.words


def _never_started(path: Path) -> bool:
    """True when the run database holds no run record (a kill landed inside ``RunStore.create``):
    an empty file, a database with no tables yet (created, killed before its schema was
    written: SQLite leaves a 4 KiB file), or fabula's tables without the run row. A database
    with tables but none of fabula's is some other program's: not ours to remove."""
    db = path / DB_NAME
    if db.stat().st_size == 0:
        return True
    try:
        conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True, timeout=10.0)
        try:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables:
                return True
            if "run" not in tables:
                return False
            return conn.execute("SELECT count(*) FROM run").fetchone()[0] == 0
        finally:
            conn.close()
    except sqlite3.Error:
        return False  # not ours to judge: opening it reports what is wrong, and the story fails with that


def _remove_run_files(path: Path) -> None:
    for name in (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", f"{DB_NAME}-journal"):
        (path / name).unlink(missing_ok=True)


def run(
    folder: str | os.PathLike[str],
    *,
    llm: LLMOptions | None = None,
    concurrency: int | None = None,
    sink: Sink | None = None,
    stop: threading.Event | None = None,
    model: LLM | None = None,
    force: bool = False,
) -> BatchResult:
    """Write every story of the batch in ``folder`` that is not completed yet (a new batch, or a
    resume: failed and stopped stories are retried, interrupted ones continue from their last
    committed unit). ``llm`` gives the transport (endpoint, key) if it moved; ``concurrency``
    replaces the stored one; ``model`` is an open model to share (stories then run one at a
    time). Returns when every story has ended or the batch was stopped (Ctrl-C is re-raised
    after every story has stopped cleanly)."""
    from filelock import FileLock, Timeout

    batch = BatchStore.open(folder)
    lock = FileLock(str(batch.folder / "batch.lock"))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        batch.close()
        raise InputError(f"{folder} is being written by another fabula batch process") from None
    try:
        return _run(batch, llm, concurrency, sink, stop or threading.Event(), model, force)
    finally:
        lock.release()
        batch.close()


def _run(
    batch: BatchStore,
    given: LLMOptions | None,
    concurrency: int | None,
    sink: Sink | None,
    stop: threading.Event,
    model: LLM | None,
    force: bool,
) -> BatchResult:
    info = batch.info()
    llm = effective_llm(info["llm"], given, info["pipeline"])
    if concurrency is not None:
        check_concurrency(concurrency)
        if concurrency != info["concurrency"]:
            batch.set_concurrency(concurrency)
    k = concurrency or info["concurrency"]
    rows = batch.stories()
    todo = [r for r in rows if r.status != "completed"]
    tracker = Tracker(rows, sink)
    notes: list[str] = []
    owned = None
    if llm.backend != "endpoint" or model is not None:
        if k > 1:
            notes.append(
                f"the {'embedded backend' if model is None else 'shared model'} writes one story at a time "
                f"(--concurrency {k} is taken as 1)"
            )
            tracker.note(notes[-1])
        k = 1
        if model is None and todo:
            model = owned = llm.open()  # loaded once for every story
    started = time.monotonic()
    streak = FailureStreak()
    try:
        if k == 1:
            for row in todo:
                if stop.is_set() or streak.tripped:
                    break
                _Story(batch, row, tracker, stop).write(info["pipeline"], llm, model, force, streak)
        else:
            _threads(batch, todo, k, tracker, stop, info["pipeline"], llm, force, streak)
    finally:
        if owned is not None:
            owned.close()
    stories = batch.stories()
    early = None
    if streak.tripped:
        early = streak.describe(sum(1 for r in stories if r.status == "pending"))
        tracker.note(early)
    return BatchResult(batch.folder, stories, tracker.snapshot(), time.monotonic() - started, k, notes, early)


def _threads(
    batch: BatchStore,
    todo: list[StoryRow],
    k: int,
    tracker: Tracker,
    stop: threading.Event,
    pipeline: str,
    llm: LLMOptions,
    force: bool,
    streak: FailureStreak,
) -> None:
    """K workers take the next story until none is left or the batch is stopped."""
    queue = list(reversed(todo))
    guard = threading.Lock()
    crashed: list[BaseException] = []

    left = [k]
    all_done = threading.Event()

    def worker() -> None:
        try:
            while not stop.is_set() and not streak.tripped:
                with guard:
                    if not queue:
                        return
                    row = queue.pop()
                _Story(batch, row, tracker, stop).write(pipeline, llm, None, force, streak)
        except KeyboardInterrupt:
            return
        except BaseException as exc:  # the batch database itself failed: stop everything
            crashed.append(exc)
            stop.set()
        finally:
            with guard:
                left[0] -= 1
                if not left[0]:
                    all_done.set()

    for n in range(k):
        threading.Thread(target=worker, name=f"fabula-batch-{n}", daemon=True).start()
    try:
        _wait(all_done)
    except KeyboardInterrupt:
        stop.set()
        running = tracker.snapshot().running
        tracker.note(
            f"stopping: {running} stor{'y' if running == 1 else 'ies'} end at their next model call "
            "(Ctrl-C again to leave at once)"
        )
        _wait(all_done)
        raise
    if crashed:
        raise crashed[0]
    if stop.is_set():
        raise KeyboardInterrupt


def _wait(done: threading.Event) -> None:
    """Wait for the workers. Not ``Thread.join``: a Ctrl-C that lands inside ``join`` can leave a
    live thread marked as finished (CPython issue 45274), and the batch would leave early."""
    while not done.wait(0.2):
        pass


def run_batch(
    folder: str | os.PathLike[str],
    pipeline: str | None = None,
    *,
    prompts: str | os.PathLike[str] | None = None,
    ids: str | None = None,
    stories: str | os.PathLike[str] | None = None,
    words: int | None = None,
    settings: dict[str, Any] | None = None,
    profile: str = "default",
    llm: LLMOptions | None = None,
    concurrency: int = 1,
    sink: Sink | None = None,
    stop: threading.Event | None = None,
    model: LLM | None = None,
) -> BatchResult:
    """The Python entry point: create the batch in ``folder`` (or, if it holds one, resume it) and
    write it. ``llm``: the model (e.g. ``LLMOptions("endpoint", endpoint=URL)``; default: the
    embedded model). Stories are planned as ``fabula batch`` plans them, without its lower bound
    on ``words`` (tests and benchmarks write short stories)."""
    if not is_batch(folder):
        if pipeline is None:
            raise InputError(f"{folder} holds no batch yet: give the pipeline")
        specs = plan_stories(
            pipeline, prompts=prompts, ids=ids, stories=stories, words=words, settings=settings, profile=profile
        )
        create(folder, pipeline, specs, llm or LLMOptions("embedded"), concurrency=concurrency).close()
    return run(folder, llm=llm, concurrency=concurrency, sink=sink, stop=stop, model=model)
