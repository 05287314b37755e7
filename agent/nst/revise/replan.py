"""Re-planning the chapters not yet written after the story changed under them (``fabula reconcile``).

Their outline entries were planned from the story before a writer's edit; the state after the
last written chapter now says otherwise. One planner call gets the premise, the written chapters'
titles, that state and the entries as planned, and gives new titles and descriptions under the
outline grammar narrowed to those chapters; their ids and word targets are kept (the book's
length and shape do not change, only what happens in it).
"""

from __future__ import annotations

import json
from typing import Any

from agent.llm import LLM, OutputValidationError, TruncatedOutputError
from agent.llm.budget import Budget
from agent.nst.config import NstConfig
from agent.nst.plan.planner import SYSTEM, PlanError, outline_schema
from agent.nst.state import NarrativeState
from grammars.nst import Outline

ROLE = "plan_outline"


def replan_request(
    prompt: str, written: list[dict[str, Any]], state: NarrativeState, edited: int, todo: list[dict[str, Any]]
) -> str:
    count = len(todo)
    titles = "\n".join(f"{c['id']}. {c['title']}" for c in written)
    planned = "\n".join(
        json.dumps({k: c[k] for k in ("id", "title", "description", "target_words")}, ensure_ascii=False) for c in todo
    )
    total = sum(int(c["target_words"]) for c in todo)
    return (
        f"Story prompt:\n{prompt}\n\nThe chapters written so far:\n{titles}\n\n"
        f"The writer edited chapter {edited}. The narrative state after chapter {written[-1]['id']}, as the "
        f"story now stands:\n{state.render()}\n\n"
        f"The chapters not yet written, as they were planned before the edit:\n{planned}\n\n"
        f"Re-plan them so they follow the state above (its names, facts and open requirements). Write the "
        f"chapter outline of the remaining chapters as JSON: the book's title, then exactly {count} chapters "
        f"with ids 1 to {count} (they are chapters {todo[0]['id']} to {todo[-1]['id']}), each with a title "
        f"and a description of 2-4 sentences of what happens. Keep each chapter's target: the targets must "
        f"sum to {total} words."
    )


def replan(
    llm: LLM,
    budget: Budget,
    config: NstConfig,
    *,
    written: list[dict[str, Any]],
    todo: list[dict[str, Any]],
    state: NarrativeState,
    edited: int,
) -> list[dict[str, Any]]:
    """New entries for ``todo`` (same ids and targets, new titles and descriptions)."""
    count = len(todo)
    targets = [int(c["target_words"]) for c in todo]
    grammar = outline_schema(sum(targets), count, config.gate_low, config.gate_high, targets=targets)
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": replan_request(config.prompt, written, state, edited, todo)},
    ]
    errors: list[str] = []
    for _ in range(max(1, config.outline_attempts)):
        try:
            reply = budget.generate(
                llm,
                messages,
                grammar,
                temperature=config.temperature,
                max_tokens=160 * count + 256,
                min_output=60 * count + 64,
                role=ROLE,
                what="the re-planned outline",
            )
            parsed = Outline.model_validate(reply.parsed)
        except (TruncatedOutputError, OutputValidationError, ValueError) as exc:
            errors.append(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            continue
        items = parsed.chapters
        if len(items) == count and all(c.title.strip() and c.description.strip() for c in items):
            return [
                {**old, "title": " ".join(new.title.split()), "description": new.description.strip()}
                for old, new in zip(todo, items, strict=True)
            ]
        errors.append(f"{len(items)} chapters or an empty title or description")
    raise PlanError(f"no valid re-planned outline after {config.outline_attempts} attempt(s): " + " | ".join(errors))
