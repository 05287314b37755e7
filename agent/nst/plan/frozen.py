"""The run's frozen plan: from the run store if planned already, else the shared cache, else new.

The store keeps the plan the run was written from, so a resume never replans even if the
cache was cleared or changed; the cache shares one plan between NstAgent, its ablations and
RollSum for the same model, prompt and length. Planner calls are recorded against unit 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from agent.bible.seed import digest as bible_digest
from agent.bible.seed import planner_block
from agent.language import language_line
from agent.llm.budget import Budget
from agent.nst.chapter.planned import Plan, PlannedChapter
from agent.nst.config import Planned
from agent.nst.plan.cache import PlanCache, cache_key, plan_digest
from agent.nst.plan.fit import fit_chapters
from agent.nst.plan.planner import Stages, make_plan
from agent.run_context import RunContext
from agent.store.writer.review import pause_for_outline

PLAN_KEYS = ("title", "premise", "synopsis", "acts", "outline", "words", "chapters", "notes")


PLANNING_WORDS = {
    "plan_premise": "planning the premise",
    "plan_synopsis": "planning the synopsis",
    "plan_acts": "planning the acts",
    "plan_outline": "planning the outline",
}
"""What a model call of each planner stage is doing, as a writer would say it (progress)."""


def stages_of(config: Planned) -> Stages:
    """The planner's stage schedule a run's settings ask for."""
    return Stages(
        config.premise_from,
        config.synopsis_from,
        config.acts_from,
        config.synopsis_words,
        config.free_outline,
        config.outline_style,
    )


def frozen_plan(ctx: RunContext[Any], budget: Budget | None = None) -> Plan:
    """The plan to write from; stored in the run on first use."""
    store, config = ctx.store, ctx.config
    assert isinstance(config, Planned)
    stored = store.plans.all()
    if "outline" in stored:
        return Plan.of(stored)
    model = (store.info().config.get("llm") or {}).get("model") or ctx.llm.model
    fitted = fit_chapters(config, budget)
    key = cache_key(model, config.prompt, config.prompt_id, config.words)
    if stages_of(config) != Stages():
        key["stages"] = asdict(stages_of(config))  # another planner's plan is not the default plan
    if fitted is not None:
        key["chapters"] = fitted.chapters  # a plan fitted to a small context is not the default plan
        ctx.emit("note", fitted.describe())
    planner_prompt = config.prompt
    bible = store.plans.get("bible")
    if bible:
        planner_prompt = f"{planner_prompt}\n\n{planner_block(bible)}"
        key["bible"] = bible_digest(bible)
    language = language_line(config.prompt, config)
    if language:
        planner_prompt = f"{planner_prompt}\n\n{language}"
        key["language"] = language
    cache = PlanCache(config.plan_cache)
    plan = cache.get(key)
    source = "cache"
    if plan is None:
        source = "planner"
        with ctx.unit(0):
            plan = make_plan(
                ctx.llm,
                planner_prompt,
                config.words,
                temperature=config.temperature,
                max_tokens=config.planner_max_tokens,
                attempts=config.outline_attempts,
                on_stage=lambda stage: ctx.emit("plan", stage),
                gate_low=config.gate_low,
                gate_high=config.gate_high,
                budget=budget,
                chapters=fitted.chapters if fitted is not None else None,
                shape=stages_of(config),
            )
        cache.put(key, plan)
    for name in PLAN_KEYS:
        if name in plan and name != "outline":
            store.plans.put(name, plan[name])
    store.plans.put("digest", plan_digest(plan))
    store.plans.put("cache_key", key)
    store.plans.put("source", source)
    if fitted is not None:
        store.plans.put("chapters_fitted", fitted.record())
    store.plans.put("outline", plan["outline"])  # last: its presence means the plan is complete
    return Plan.of(store.plans.all())


def stop_after_plan(ctx: RunContext[Any], outline: Sequence[PlannedChapter]) -> bool:
    """True when the run was started with ``--plan-only``: the outline is stored, no chapter is
    written, and the run is left stopped (resumable) for ``fabula outline`` and ``fabula resume``.
    Also True when the run reviews (``--review``) and its outline is not approved yet."""
    if not ctx.plan_only:
        if pause_for_outline(ctx.store):  # --review: the outline is reviewed before the first chapter
            ctx.emit("note", f"outline stored ({len(outline)} chapters); in review until fabula approve")
            return True
        return False
    ctx.emit("note", f"outline stored ({len(outline)} chapters); no chapter written (plan only)")
    return True
