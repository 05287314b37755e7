"""Which runs a published comparison may score (NstAgent 5, A.1).

The paper scores a story only if it is complete, every chapter passed the +-20% length gate
and every judgment finished. Each rule reads what the store holds: the run's status and
planned unit count, the chapters' ``degraded`` marks, the gate check of
``agent.eval.textmetrics`` (per chapter, or per story for single-call methods and Magnet) and
the judgments of the current text. A run that breaks a rule is left out by default and the
reason is kept, so ``compare`` and ``report`` can say how many were left out and why.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from agent.eval.story import Story
from agent.store import RunStore

INCOMPLETE = "incomplete"
OUT_OF_GATE = "out of gate"
UNFINISHED = "unfinished judgments"
SCORED_KINDS = ("consistency", "quality", "editorial")


def completeness(store: RunStore, story: Story) -> list[str]:
    """Why the story is not complete: the run did not finish, or has fewer units than planned."""
    info = store.info()
    status = store.live_status()
    if status != "completed":
        return [f"{INCOMPLETE}: status {status}, {len(story.sections)} section(s) written"]
    units = info.last_unit
    if info.target_units is not None and units < info.target_units:
        return [f"{INCOMPLETE}: {units} of {info.target_units} units written"]
    if not story.sections:
        return [f"{INCOMPLETE}: no text"]
    return []


def gate(metrics: dict[str, Any]) -> list[str]:
    """Why the story is outside the length gate (``metrics`` from ``model_free_metrics``)."""
    reasons = []
    if metrics.get("degraded_chapters"):
        reasons.append(f"{OUT_OF_GATE}: {metrics['degraded_chapters']} degraded chapter(s)")
    checked, passed = metrics.get("gate_checked") or 0, metrics.get("gate_passed") or 0
    if not checked:
        reasons.append(f"{OUT_OF_GATE}: no length target stored, so the gate cannot be checked")
    elif passed < checked:
        unit = "chapter(s)" if metrics.get("gate_unit") == "chapter" else "story"
        reasons.append(f"{OUT_OF_GATE}: {checked - passed} of {checked} {unit} outside the gate")
    return reasons


def unfinished(store: RunStore, story: Story, scored: dict[str, bool]) -> list[str]:
    """Why a judgment of the current text did not finish: a failed row that no rerun has filled,
    or judgments of a kind that never reached a complete score (``scored[kind]``)."""
    failed: Counter[str] = Counter()
    judged: set[str] = set()
    for row in store.query("SELECT kind, status, meta FROM judgments"):
        digest = json.loads(row["meta"] or "{}").get("digest")
        if digest is not None and digest != story.digest:
            continue  # a judgment of an earlier text: superseded, not outstanding
        if row["kind"] == "quality_criteria" and scored.get("quality"):
            continue  # a criteria design that failed once and was finished by a later run
        judged.add(row["kind"])
        if row["status"] == "failed":
            failed[row["kind"]] += 1
    reasons = [f"{UNFINISHED}: {n} failed {kind} judgment(s)" for kind, n in sorted(failed.items())]
    for kind in SCORED_KINDS:
        if kind in judged and not failed[kind] and not scored.get(kind):
            reasons.append(f"{UNFINISHED}: {kind} judged but never completed")
    return reasons


def exclusion_reasons(store: RunStore, story: Story, metrics: dict[str, Any], scored: dict[str, bool]) -> list[str]:
    """Every rule the run breaks; empty when it may be scored."""
    return completeness(store, story) + gate(metrics) + unfinished(store, story, scored)


def select(rows: list[dict[str, Any]], *, include_incomplete: bool) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows to score and the lines that say how many were left out (or marked) and why."""
    bad = [r for r in rows if r.get("excluded")]
    if not rows:
        return rows, []
    if not bad:
        return rows, [f"all {len(rows)} run(s) are complete, in gate and fully judged"]
    counts: Counter[str] = Counter()
    for r in bad:
        counts.update({reason.split(":")[0] for reason in r["excluded"]})
    why = ", ".join(f"{name} {n}" for name, n in sorted(counts.items()))
    detail = [f"  {r['run']}: {'; '.join(r['excluded'])}" for r in bad]
    if include_incomplete:
        for r in bad:
            r["marked"] = True
        return rows, [
            f"{len(bad)} of {len(rows)} run(s) included although not publishable "
            f"(--include-incomplete; marked †): {why}",
            *detail,
        ]
    kept = [r for r in rows if not r.get("excluded")]
    return kept, [
        f"{len(bad)} of {len(rows)} run(s) left out: {why} (--include-incomplete includes them, marked)",
        *detail,
    ]
