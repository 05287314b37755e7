"""``fabula eval compare A... --vs B...``: paired comparisons (NstAgent C.4, Magnet 4.3).

Runs are paired by prompt and target length (the two methods wrote from the same prompt).
Per metric and target length: mean difference A - B, paired t-test, seeded 10,000-resample
bootstrap 95% CI, and Holm's correction applied within each metric across the target
lengths compared (the comparisons a reader scans in one column). Unpaired or unscored runs
are listed, never silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.eval.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, PairedResult, holm, paired, stars

METRICS = ("subtype_ced", "instance_ced", "local_instance_ced", "verified_instance_ced", "writing_quality",
           "annotations", "rubric", "repeated_4gram_rate", "distinct_2", "total_tokens_per_1k_words")
LOWER_IS_BETTER = {"subtype_ced", "instance_ced", "local_instance_ced", "verified_instance_ced", "annotations",
                   "repeated_4gram_rate", "total_tokens_per_1k_words"}


@dataclass
class Comparison:
    metric: str
    length: int | None
    result: PairedResult
    pairs: list[tuple[str, str]]


def pair_rows(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> tuple[dict[tuple[str, Any], tuple[dict, dict]],
                                                                      list[str]]:
    """Pair runs by (prompt, target length); returns pairs and notes on what could not be paired."""
    notes: list[str] = []

    def index(rows: list[dict[str, Any]], side: str) -> dict[tuple[str, Any], dict[str, Any]]:
        out: dict[tuple[str, Any], dict[str, Any]] = {}
        for row in rows:
            key = (row["prompt_key"], row["target_words"])
            if key in out:
                notes.append(f"{side}: {row['run']} repeats prompt {key[0]} at {key[1]} words; the first is used")
                continue
            out[key] = row
        return out

    ia, ib = index(a, "A"), index(b, "B")
    for key in sorted(set(ia) ^ set(ib), key=str):
        side = "A" if key in ia else "B"
        notes.append(f"{side}: {(ia.get(key) or ib.get(key))['run']} has no partner (prompt {key[0]}, {key[1]} words)")
    return {k: (ia[k], ib[k]) for k in ia if k in ib}, notes


def compare(a: list[dict[str, Any]], b: list[dict[str, Any]], *, metrics: tuple[str, ...] = METRICS,
            resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED) -> tuple[list[Comparison], list[str]]:
    pairs, notes = pair_rows(a, b)
    comparisons: list[Comparison] = []
    for metric in metrics:
        by_length: dict[Any, list[tuple[dict, dict]]] = {}
        for (_, length), (ra, rb) in pairs.items():
            if ra.get(metric) is None or rb.get(metric) is None:
                continue
            by_length.setdefault(length, []).append((ra, rb))
        unscored = sum(1 for ra, rb in pairs.values() if ra.get(metric) is None or rb.get(metric) is None)
        if unscored and by_length:
            notes.append(f"{metric}: {unscored} pair(s) left out because one side is not scored")
        group: list[Comparison] = []
        for length in sorted(by_length, key=lambda x: (x is None, x or 0)):
            rows = by_length[length]
            result = paired([ra[metric] for ra, _ in rows], [rb[metric] for _, rb in rows], resamples=resamples,
                            seed=seed)
            group.append(Comparison(metric, length, result, [(ra["run"], rb["run"]) for ra, rb in rows]))
        for comparison, adjusted in zip(group, holm([c.result.p for c in group]), strict=True):
            comparison.result = PairedResult(**{**comparison.result.__dict__, "p_holm": adjusted})
        comparisons.extend(group)
    return comparisons, notes


def render(comparisons: list[Comparison], notes: list[str]) -> list[str]:
    """A Markdown table: difference [95% CI], p (Holm), stars."""
    lines = ["| metric | length | n | mean A | mean B | A - B [95% CI] | p | p (Holm) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for c in comparisons:
        r = c.result
        ci = f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}]" if r.ci_low is not None else "[n/a]"
        p = f"{r.p:.4g}" if r.p is not None else "n/a"
        ph = f"{r.p_holm:.4g}{stars(r.p_holm)}" if r.p_holm is not None else "n/a"
        lines.append(f"| {c.metric} | {c.length or '-'} | {r.n} | {r.mean_a:.3f} | {r.mean_b:.3f} | "
                     f"{r.diff:+.3f} {ci} | {p} | {ph} |")
    if not comparisons:
        lines.append("| (no paired, scored runs) | | | | | | | |")
    lines += ["", "Stars mark p < 0.05, 0.01, 0.001 after Holm's correction within each metric across lengths."]
    lines += [f"- {n}" for n in notes]
    return lines
