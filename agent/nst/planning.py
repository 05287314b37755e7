"""The run's frozen plan: from the run store if planned already, else the shared cache, else new.

The store keeps the plan the run was written from, so a resume never replans even if the
cache was cleared or changed; the cache shares one plan between NstAgent, its ablations and
RollSum for the same model, prompt and length.
"""

from __future__ import annotations

from typing import Any

from agent.llm import LLM
from agent.nst import progress
from agent.nst.plan_cache import PlanCache, cache_key, plan_digest
from agent.nst.planner import make_plan
from agent.store import RunStore

PLAN_KEYS = ("premise", "synopsis", "acts", "outline", "words", "chapters", "notes")


def frozen_plan(store: RunStore, llm: LLM, config: dict[str, Any]) -> dict[str, Any]:
    stored = store.plan()
    if "outline" in stored:
        return stored
    model = (config.get("llm") or {}).get("model") or llm.model
    key = cache_key(model, config["prompt"], config.get("prompt_id"), int(config["words"]))
    cache = PlanCache(config.get("plan_cache"))
    plan = cache.get(key)
    source = "cache"
    if plan is None:
        source = "planner"
        previous = store.unit_in_flight
        store.unit_in_flight = 0
        try:
            plan = make_plan(llm, config["prompt"], int(config["words"]), temperature=float(config["temperature"]),
                             max_tokens=int(config["planner_max_tokens"]), attempts=int(config["outline_attempts"]),
                             on_stage=lambda stage: progress.emit({"event": "plan", "stage": stage}))
        finally:
            store.unit_in_flight = previous
        cache.put(key, plan)
    for name in PLAN_KEYS:
        if name in plan and name != "outline":
            store.put_plan(name, plan[name])
    store.put_plan("digest", plan_digest(plan))
    store.put_plan("cache_key", key)
    store.put_plan("source", source)
    store.put_plan("outline", plan["outline"])  # last: its presence means the plan is complete
    return store.plan()
