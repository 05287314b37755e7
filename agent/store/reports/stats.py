"""What ``fabula show`` and ``fabula runs`` report about a run, computed from the store."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from agent.store.runstore import RunStore


@dataclass
class RunSummary:
    """Progress, size, cost and health of one run."""

    pipeline: str
    status: str
    unit_kind: str
    units_done: int
    target_units: int | None
    words: int
    chapters: int
    steps: int
    paragraphs: int
    state_bytes: int
    state_counts: dict[str, int]
    llm_calls: int
    llm_errors: int
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int
    tool_calls: dict[str, int]
    tool_errors: int
    wall_s: float
    sessions: int
    degraded: list[dict[str, Any]] = field(default_factory=list)
    revised_chapters: int = 0
    budget_actions: dict[str, int] = field(default_factory=dict)
    """What gave way to fit the context (NstAgent family): action -> times, from the ledger's budget rows."""
    context: dict[str, Any] | None = None
    """The context the run budgeted against (the plan's ``context`` entry), if any."""
    model: str | None = None
    backend: str | None = None
    endpoint: str | None = None
    profile: str | None = None
    """The settings profile the run was written with (``small``: the small-model aids)."""
    """The server the latest session used (credentials removed), if any."""
    error: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0

    @property
    def cached_share(self) -> float | None:
        return self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cached_share": self.cached_share}


def summarize(store: RunStore) -> RunSummary:
    info = store.info()
    q = store.query
    chapters = q("SELECT count(*), coalesce(sum(words), 0), coalesce(sum(version > 1), 0) FROM chapters")[0]
    paragraphs = q("SELECT count(*), coalesce(sum(words), 0) FROM paragraphs")[0]
    steps = q("SELECT count(*) FROM steps")[0][0]
    calls = q(
        "SELECT count(*), coalesce(sum(error IS NOT NULL), 0), coalesce(sum(prompt_tokens), 0), "
        "coalesce(sum(cached_prompt_tokens), 0), coalesce(sum(completion_tokens), 0) FROM llm_calls"
    )[0]
    tools = {
        r[0]: r[1]
        for r in q("SELECT tool, count(*) FROM tool_calls WHERE tool != 'budget' GROUP BY tool ORDER BY tool")
    }
    budget: dict[str, int] = {}
    for (arguments,) in q("SELECT arguments FROM tool_calls WHERE tool = 'budget' ORDER BY id"):
        action = str((json.loads(arguments) or {}).get("action", "?"))
        budget[action] = budget.get(action, 0) + 1
    tool_errors = q("SELECT count(*) FROM tool_calls WHERE ok = 0")[0][0]
    wall, sessions = q("SELECT coalesce(sum(coalesce(ended_at, last_at) - started_at), 0), count(*) FROM sessions")[0]
    last = q("SELECT config FROM sessions ORDER BY id DESC LIMIT 1")
    transport = json.loads(last[0][0]).get("transport") if last else None
    state_rows = q("SELECT state FROM states ORDER BY unit DESC LIMIT 1")
    state_json = state_rows[0][0] if state_rows else ""
    degraded = [
        {"chapter": r[0], "reason": r[1]}
        for r in q("SELECT idx, degraded_reason FROM chapters WHERE degraded = 1 ORDER BY idx")
    ]
    return RunSummary(
        pipeline=info.pipeline,
        status=store.live_status(),
        unit_kind=info.unit_kind,
        units_done=info.last_unit,
        target_units=info.target_units,
        words=chapters[1] + paragraphs[1],
        chapters=chapters[0],
        steps=steps,
        paragraphs=paragraphs[0],
        state_bytes=len(state_json.encode("utf-8")),
        state_counts=_collection_sizes(json.loads(state_json)) if state_json else {},
        llm_calls=calls[0],
        llm_errors=calls[1],
        prompt_tokens=calls[2],
        cached_prompt_tokens=calls[3],
        completion_tokens=calls[4],
        tool_calls=tools,
        tool_errors=tool_errors,
        wall_s=float(wall),
        sessions=sessions,
        degraded=degraded,
        revised_chapters=chapters[2],
        model=info.model,
        backend=info.backend,
        endpoint=transport.get("endpoint") if isinstance(transport, dict) else None,
        profile=info.config.get("profile") if isinstance(info.config.get("profile"), str) else None,
        error=info.error,
        created_at=info.created_at,
        updated_at=info.updated_at,
        budget_actions=budget,
        context=store.plans.get("context"),
    )


def _collection_sizes(state: Any) -> dict[str, int]:
    """Entries per top-level collection of a state (characters, past events, ...)."""
    if not isinstance(state, dict):
        return {}
    return {key: len(value) for key, value in state.items() if isinstance(value, list | dict)}
