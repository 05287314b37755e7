"""What every runner is handed: the run's store, its model, its typed config and an event sink.

A runner never reaches for globals: progress goes to ``ctx.emit`` (the CLI decides how to show
it), the ledger attributes calls to a unit through ``with ctx.unit(n):`` (instead of setting
and resetting ``store.db.unit_in_flight`` by hand), and the model is opened lazily, recording
into the run's ledger, so a runner that needs no model (a test's fake) opens none.

Every model call becomes an event too (role, tokens so far, words written, ETA from the
pace measured in this session), so a terminal shows life during long units.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agent.llm.types import CallRecord
from agent.store import RunStore

if TYPE_CHECKING:
    from agent.llm import LLM
    from agent.llm.sampling import Sampling

C = TypeVar("C")


@dataclass(frozen=True)
class Event:
    """One progress event. ``kind``: plan, unit, call, draft, tool, committed, note."""

    kind: str
    unit: int | None = None
    units: int | None = None
    detail: str | None = None
    """The planner stage, the role of a model call, the tool, or a note's text."""
    words: int = 0
    """Words of story committed so far (the whole run)."""
    target_words: int | None = None
    calls: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    elapsed_s: float = 0.0
    eta_s: float | None = None
    data: dict[str, Any] = field(default_factory=dict)
    """Kind-specific facts: a draft's words and verdict, a committed unit's words and flags."""


EventSink = Callable[[Event], None]


def ignore(event: Event) -> None:
    return None


class RunContext(Generic[C]):
    """A run in progress: ``store``, ``config`` (typed), ``llm`` (opened on first use), ``emit``.

    ``plan_only``: a planned pipeline stops once its outline is stored (``write --plan-only``). It is
    an instruction to this session, not a setting: it is not stored, so the resume that writes
    the chapters sees the same configuration."""

    def __init__(
        self,
        store: RunStore,
        config: C,
        *,
        llm: LLM | None = None,
        open_llm: Callable[[RunStore], LLM] | None = None,
        events: EventSink | None = None,
        plan_only: bool = False,
    ) -> None:
        if llm is None and open_llm is None:
            raise ValueError("a run context needs a model or a way to open one")
        self.store = store
        self.config = config
        self.plan_only = plan_only
        self._llm = llm
        self._open_llm = open_llm
        self._opened = False
        self._previous_policy: Callable[[str | None], Sampling] | None = None
        self._added_recorder = False
        self._sink = events or ignore
        self._started = time.monotonic()
        self._unit: int | None = None
        self.units: int | None = None
        self.target_words: int | None = None
        self.words = 0
        self._words_at_start: int | None = None
        self.calls = self.prompt_tokens = self.cached_prompt_tokens = self.completion_tokens = 0
        if llm is not None:
            self._attach(llm)

    # -- the model -------------------------------------------------------------------------
    @property
    def llm(self) -> LLM:
        if self._llm is None:
            assert self._open_llm is not None
            self._llm = self._open_llm(self.store)
            self._opened = True
            self._attach(self._llm)
        return self._llm

    def _attach(self, llm: LLM) -> None:
        self._added_recorder = self.store.ledger.recorder not in llm.recorders
        if self._added_recorder:
            llm.recorders.append(self.store.ledger.recorder)
        llm.recorders.append(self._on_call)
        self._previous_policy = llm.sampling_policy
        policy = getattr(self.config, "sampling_for", None)
        if callable(policy):
            llm.sampling_policy = policy  # the pipeline's per-role sampling, for calls that set none

    def close(self) -> None:
        """Detach from the model; close it if this context opened it."""
        if self._llm is None:
            return
        if self._on_call in self._llm.recorders:
            self._llm.recorders.remove(self._on_call)
        if self._added_recorder and self.store.ledger.recorder in self._llm.recorders:
            self._llm.recorders.remove(self.store.ledger.recorder)  # a shared model outlives this run's store
        self._llm.sampling_policy = self._previous_policy
        if self._opened:
            self._llm.close()

    def __enter__(self) -> RunContext[C]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- ledger attribution -----------------------------------------------------------------
    @contextmanager
    def unit(self, n: int) -> Iterator[None]:
        """Calls and tool calls made inside are recorded against unit ``n`` (0: the plan)."""
        previous, self.store.db.unit_in_flight = self.store.db.unit_in_flight, n
        self._unit = n
        if n > 0:
            self.emit("unit")
        try:
            yield
        finally:
            self.store.db.unit_in_flight = previous
            self._unit = previous

    # -- progress ---------------------------------------------------------------------------
    def set_progress(
        self, *, words: int | None = None, units: int | None = None, target_words: int | None = None
    ) -> None:
        """What the run has written so far and where it is going (for the ETA)."""
        if words is not None:
            if self._words_at_start is None:
                self._words_at_start = words
                self._started = time.monotonic()
            self.words = words
        if units is not None:
            self.units = units
        if target_words is not None:
            self.target_words = target_words

    def emit(self, kind: str, detail: str | None = None, **data: Any) -> None:
        self._sink(
            Event(
                kind,
                self._unit,
                self.units,
                detail,
                self.words,
                self.target_words,
                self.calls,
                self.prompt_tokens,
                self.cached_prompt_tokens,
                self.completion_tokens,
                time.monotonic() - self._started,
                self.eta_s(),
                data,
            )
        )

    def eta_s(self) -> float | None:
        """Seconds left at the pace measured since this session's first progress report."""
        if not self.target_words or self._words_at_start is None:
            return None
        done = self.words - self._words_at_start
        elapsed = time.monotonic() - self._started
        if done <= 0 or elapsed <= 0:
            return None
        return max(0.0, (self.target_words - self.words) / (done / elapsed))

    def _on_call(self, record: CallRecord) -> None:
        self.calls += 1
        self.prompt_tokens += record.prompt_tokens
        self.cached_prompt_tokens += record.cached_prompt_tokens
        self.completion_tokens += record.completion_tokens
        self.emit("call", record.role, failed=record.error is not None)
