"""The call ledger as a reader wants it: per call, and summed per unit (chapter or step).

Tokens, the cached share of prompt tokens, latency, and tool calls per unit; unit 0 holds
what was spent planning before the first unit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from agent.llm.types import TIMING_PARTS, CallTiming
from agent.store.runstore import RunStore


@dataclass(frozen=True)
class CallRow:
    id: int
    unit: int | None
    role: str | None
    model: str
    prompt_tokens: int
    cached_prompt_tokens: int
    completion_tokens: int
    latency_s: float
    finish_reason: str | None
    error: str | None
    created_at: float
    """When the call was recorded: as it ended."""

    @property
    def cached_share(self) -> float | None:
        return self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else None


@dataclass
class UnitCost:
    unit: int
    calls: int = 0
    errors: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    """Model time: the time any of the unit's calls was under way, calls that overlapped (sent
    together to a server, decoded together in process) counted once."""
    tools: dict[str, int] = field(default_factory=dict)
    tool_errors: int = 0

    @property
    def cached_share(self) -> float | None:
        return self.cached_prompt_tokens / self.prompt_tokens if self.prompt_tokens else None

    @property
    def tool_calls(self) -> int:
        return sum(self.tools.values())


def calls(store: RunStore) -> list[CallRow]:
    rows = store.query(
        "SELECT id, unit, role, model, prompt_tokens, cached_prompt_tokens, completion_tokens, "
        "latency_s, finish_reason, error, created_at FROM llm_calls ORDER BY id"
    )
    return [CallRow(*tuple(r)) for r in rows]


def busy_seconds(spans: list[tuple[float, float]]) -> float:
    """The length of the union of ``(start, end)`` spans."""
    total, reached = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reached:
            total += end - max(start, reached)
            reached = end
    return total


def per_unit(store: RunStore) -> list[UnitCost]:
    """Sums per unit, in unit order; units with only tool calls are included."""
    units: dict[int, UnitCost] = {}
    spans: dict[int, list[tuple[float, float]]] = {}
    for c in calls(store):
        u = units.setdefault(c.unit or 0, UnitCost(c.unit or 0))
        u.calls += 1
        u.errors += c.error is not None
        u.prompt_tokens += c.prompt_tokens
        u.cached_prompt_tokens += c.cached_prompt_tokens
        u.completion_tokens += c.completion_tokens
        spans.setdefault(u.unit, []).append((c.created_at - c.latency_s, c.created_at))
    for unit, held in spans.items():
        units[unit].latency_s = busy_seconds(held)
    for unit, tool, n, bad in store.query(
        "SELECT unit, tool, count(*), coalesce(sum(ok = 0), 0) FROM tool_calls GROUP BY unit, tool ORDER BY unit, tool"
    ):
        u = units.setdefault(unit, UnitCost(unit))
        u.tools[tool] = n
        u.tool_errors += bad
    return [units[k] for k in sorted(units)]


@dataclass
class RoleTiming:
    """Where one role's calls spent their time (in-process engines; ``timed``: calls that
    reported a split). ``other``: latency beyond the parts (templating, detokenizing, checks)."""

    role: str
    calls: int = 0
    timed: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    timed_latency_s: float = 0.0
    timed_completion_tokens: int = 0
    parts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TIMING_PARTS, 0.0))

    @property
    def other(self) -> float:
        return max(0.0, self.timed_latency_s - sum(self.parts.values()))

    @property
    def decode_rate(self) -> float | None:
        """Generated tokens per second of decoding (the engine's own steps, sampling excluded), over
        the calls that reported a split."""
        return self.timed_completion_tokens / self.parts["decode"] if self.parts["decode"] > 0 else None


def per_role_timing(store: RunStore) -> list[RoleTiming]:
    """The ledger's calls summed per role, in order of first call, then all roles as ``total``."""
    roles: dict[str, RoleTiming] = {}
    total = RoleTiming("total")
    for row in store.query(
        "SELECT role, prompt_tokens, cached_prompt_tokens, completion_tokens, latency_s, timing "
        "FROM llm_calls ORDER BY id"
    ):
        for sums in (roles.setdefault(row["role"] or "(none)", RoleTiming(row["role"] or "(none)")), total):
            sums.calls += 1
            sums.prompt_tokens += row["prompt_tokens"]
            sums.cached_prompt_tokens += row["cached_prompt_tokens"]
            sums.completion_tokens += row["completion_tokens"]
            sums.latency_s += row["latency_s"]
            if row["timing"]:
                sums.timed += 1
                sums.timed_latency_s += row["latency_s"]
                sums.timed_completion_tokens += row["completion_tokens"]
                for part, seconds in CallTiming.from_dict(json.loads(row["timing"])).as_dict().items():
                    sums.parts[part] += seconds
    return [*roles.values(), total] if roles else []
