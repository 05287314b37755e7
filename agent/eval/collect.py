"""One row of numbers per run, recomputed from the store alone (no model call).

Judge-based metrics average over judges that completed their protocol on the current text
(usually one). A metric is ``None`` when the run is not scored for it: no judgment, or a
failed/missing one (never counted as zero errors). ``judge_setups`` says which judge setup
(and, for quality, which criteria) each family of scores came from, so ``compare`` pairs only
like with like; ``excluded`` lists the publication rules the run breaks
(``agent.eval.eligibility``); ``injection`` is the planted pair of an ``eval inject`` copy.
"""

from __future__ import annotations

from statistics import mean
from typing import Any

from agent.eval.ced import best_scores
from agent.eval.editorial import editorial_scores
from agent.eval.eligibility import exclusion_reasons
from agent.eval.inject import PLAN_KEY, detection
from agent.eval.quality import quality_results
from agent.eval.story import load_story
from agent.eval.textmetrics import model_free_metrics
from agent.store import RunStore
from agent.store import judgments as stored

CONSISTENCY_METRICS = (
    "subtype_ced",
    "instance_ced",
    "local_instance_ced",
    "global_instance_ced",
    "verified_subtype_ced",
    "verified_instance_ced",
    "dropped_unverified",
    "checked_words",
)


def run_row(store: RunStore) -> dict[str, Any]:
    info = store.info()
    story = load_story(store)
    row: dict[str, Any] = {
        "run": str(store.run_dir),
        "pipeline": info.pipeline,
        "model": info.model,
        "status": info.status,
        "prompt_key": story.prompt_key,
        "method": info.config.get("method") or _method(info.pipeline, info.config),
    }
    row.update(model_free_metrics(store, story))
    scores = best_scores(store, story)
    row["consistency_judges"] = [s.judge for s in scores]
    metrics = [s.metrics() for s in scores]
    keys = sorted({k for m in metrics for k in m})
    for key in keys:
        row[key] = mean(m[key] for m in metrics) if metrics else None
    for key in CONSISTENCY_METRICS:
        row.setdefault(key, None)
    row["consistency_failed"] = sum(1 for j in stored.select(store, "consistency") if not j.ok)
    quality = quality_results(store, story)
    row["writing_quality"] = mean(r["score"] for r in quality.values()) if quality else None
    editorial = editorial_scores(store, story)
    row["annotations"] = editorial["annotations"] if editorial else None
    row["rubric"] = editorial["rubric"] if editorial else None
    row["editorial"] = editorial
    row["failed_judgments"] = int(store.query("SELECT count(*) FROM judgments WHERE status = 'failed'")[0][0])
    row["judge_setups"] = {
        "consistency": _setup(s.judge_digest for s in scores) if scores else None,
        "quality": _setup(r["judge_digest"] for r in quality.values()) if quality else None,
        "criteria": _setup(r["criteria_digest"] for r in quality.values()) if quality else None,
        "editorial": _setup(editorial["judge_digests"]) if editorial else None,
    }
    row["judge_specs"] = _specs(store)
    row["excluded"] = exclusion_reasons(
        store, story, row, {"consistency": bool(scores), "quality": bool(quality), "editorial": bool(editorial)}
    )
    row["injection"] = detection(store) if store.plans.get(PLAN_KEY) is not None else None
    return row


UNRECORDED = "unrecorded"
"""The setup of a judgment stored before setups were recorded: it matches nothing."""


def _setup(digests: Any) -> str:
    """One identity for the judges behind an averaged score: their sorted setup digests."""
    return ",".join(sorted(str(d) if d else UNRECORDED for d in digests))


def _specs(store: RunStore) -> dict[str, Any]:
    """Every judge setup and criteria set recorded in this run, by digest (to say what differs)."""
    specs: dict[str, Any] = {}
    for kind in ("consistency", "quality", "editorial"):
        for j in stored.select(store, kind):
            if j.meta.get("judge_digest"):
                specs[j.meta["judge_digest"]] = j.meta.get("judge_setup")
            if j.meta.get("criteria_digest"):
                specs[j.meta["criteria_digest"]] = {"criteria": [c.get("name") for c in j.meta.get("criteria", [])]}
    return specs


def _method(pipeline: str, config: dict[str, Any]) -> str:
    """A readable method name: the pipeline plus any ablation switched off."""
    off = [name for name in ("state", "lookback") if config.get(name) is False]
    return pipeline + "".join(f"-no-{name}" for name in off)
