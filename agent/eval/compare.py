"""``fabula eval compare A... --vs B... [--vs C...]``: paired comparisons (NstAgent C.4, Magnet 4.3).

Runs are paired by prompt and target length (the two methods wrote from the same prompt).
Per baseline, metric and target length: mean difference A - B, paired t-test, seeded
10,000-resample bootstrap 95% CI, and Holm's correction within each metric over the
comparisons a reader scans in one column: across the baselines at each length when there are
several baselines (the paper's 10K table), across the lengths when there is one (its
length table). Unpaired or unscored runs are listed, never silently dropped.

A pair counts for a judged metric only if both runs were judged by the same judge setup
(endpoint, model, temperature, judge-prompt version) and, for writing quality, against the
same criteria; otherwise the comparison is refused with one line per pair naming the runs and
what differs, unless ``allow_mixed`` is set, in which case the pairs are kept and marked.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from agent.eval.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, PairedResult, holm, paired, stars

METRICS = (
    "subtype_ced",
    "instance_ced",
    "local_instance_ced",
    "verified_instance_ced",
    "writing_quality",
    "annotations",
    "rubric",
    "repeated_4gram_rate",
    "distinct_2",
    "total_tokens_per_1k_words",
)
LOWER_IS_BETTER = {
    "subtype_ced",
    "instance_ced",
    "local_instance_ced",
    "verified_instance_ced",
    "annotations",
    "repeated_4gram_rate",
    "total_tokens_per_1k_words",
}
SETUPS = {
    "subtype_ced": ("consistency",),
    "instance_ced": ("consistency",),
    "local_instance_ced": ("consistency",),
    "global_instance_ced": ("consistency",),
    "verified_instance_ced": ("consistency",),
    "verified_subtype_ced": ("consistency",),
    "writing_quality": ("quality", "criteria"),
    "annotations": ("editorial",),
    "rubric": ("editorial",),
}
"""Which recorded judge setups must agree for a pair to count in a metric (none: model-free)."""


class MixedJudgesError(ValueError):
    """Pairs whose scores come from different judge setups or criteria (one line per pair)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


@dataclass
class Comparison:
    metric: str
    length: int | None
    result: PairedResult
    pairs: list[tuple[str, str]]
    baseline: str = "B"
    mixed: list[tuple[str, str]] = field(default_factory=list)
    marked: list[str] = field(default_factory=list)
    """Runs included with ``--include-incomplete`` that break a publication rule."""


def pair_rows(
    a: list[dict[str, Any]], b: list[dict[str, Any]], *, label: str = "B"
) -> tuple[dict[tuple[str, Any], tuple[dict, dict]], list[str]]:
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

    ia, ib = index(a, "A"), index(b, label)
    for key in sorted(set(ia) ^ set(ib), key=str):
        side, row = ("A", ia[key]) if key in ia else (label, ib[key])
        notes.append(f"{side}: {row['run']} has no partner (prompt {key[0]}, {key[1]} words)")
    return {k: (ia[k], ib[k]) for k in ia if k in ib}, notes


def setup_difference(ra: dict[str, Any], rb: dict[str, Any], metric: str) -> str | None:
    """What differs between the judge setups behind ``metric`` in two runs, or ``None`` if alike."""
    diffs = []
    for family in SETUPS.get(metric, ()):
        sa = (ra.get("judge_setups") or {}).get(family)
        sb = (rb.get("judge_setups") or {}).get(family)
        if sa is None or sb is None or (sa == sb and "unrecorded" not in sa):
            continue
        diffs.append(_describe(family, sa, sb, ra.get("judge_specs") or {}, rb.get("judge_specs") or {}))
    return "; ".join(diffs) if diffs else None


def _describe(family: str, sa: str, sb: str, specs_a: dict[str, Any], specs_b: dict[str, Any]) -> str:
    if "unrecorded" in (sa + sb):
        return f"{family} judge setup not recorded (judged before setups were stored: rejudge)"
    if family == "criteria":
        return f"quality criteria {sa[:12]} vs {sb[:12]}"
    da, db = sa.split(","), sb.split(",")
    if len(da) == len(db) == 1 and isinstance(specs_a.get(da[0]), dict) and isinstance(specs_b.get(db[0]), dict):
        a, b = specs_a[da[0]], specs_b[db[0]]
        fields = [f"{k} {a.get(k)} vs {b.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        return f"{family} judge " + ", ".join(fields)
    return f"{family} judges {sa} vs {sb}"


def compare(
    a: list[dict[str, Any]],
    baselines: list[list[dict[str, Any]]],
    *,
    metrics: tuple[str, ...] = METRICS,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    allow_mixed: bool = False,
    labels: list[str] | None = None,
) -> tuple[list[Comparison], list[str]]:
    """Every (baseline, metric, length) comparison with Holm applied per column; raises
    :class:`MixedJudgesError` on pairs judged differently unless ``allow_mixed``."""
    labels = labels or baseline_labels(baselines)
    notes: list[str] = []
    mixed_lines: list[str] = []
    comparisons: list[Comparison] = []
    for label, b in zip(labels, baselines, strict=True):
        pairs, pair_notes = pair_rows(a, b, label=label)
        notes += pair_notes
        for metric in metrics:
            by_length: dict[Any, list[tuple[dict, dict]]] = {}
            for (_, length), (ra, rb) in pairs.items():
                if ra.get(metric) is None or rb.get(metric) is None:
                    continue
                by_length.setdefault(length, []).append((ra, rb))
            unscored = sum(1 for ra, rb in pairs.values() if ra.get(metric) is None or rb.get(metric) is None)
            if unscored and by_length:
                notes.append(f"{label} {metric}: {unscored} pair(s) left out because one side is not scored")
            for length in sorted(by_length, key=lambda x: (x is None, x or 0)):
                rows = by_length[length]
                mixed = []
                for ra, rb in rows:
                    diff = setup_difference(ra, rb, metric)
                    if diff:
                        mixed.append((ra["run"], rb["run"]))
                        mixed_lines.append(f"{metric}: {ra['run']} vs {rb['run']}: {diff}")
                result = paired(
                    [ra[metric] for ra, _ in rows], [rb[metric] for _, rb in rows], resamples=resamples, seed=seed
                )
                marked = [r["run"] for pair in rows for r in pair if r.get("marked")]
                comparisons.append(
                    Comparison(
                        metric, length, result, [(ra["run"], rb["run"]) for ra, rb in rows], label, mixed, marked
                    )
                )
    if mixed_lines and not allow_mixed:
        raise MixedJudgesError(list(dict.fromkeys(mixed_lines)))
    if mixed_lines:
        notes += [f"MIXED JUDGES (--allow-mixed): {line}" for line in dict.fromkeys(mixed_lines)]
    _apply_holm(comparisons, several_baselines=len(baselines) > 1)
    return comparisons, notes


def _apply_holm(comparisons: list[Comparison], *, several_baselines: bool) -> None:
    """Holm within each metric: per length across baselines, or across lengths for one baseline."""
    families: dict[tuple[Any, ...], list[Comparison]] = {}
    for c in comparisons:
        key = (c.metric, c.length) if several_baselines else (c.metric, c.baseline)
        families.setdefault(key, []).append(c)
    for group in families.values():
        for comparison, adjusted in zip(group, holm([c.result.p for c in group]), strict=True):
            comparison.result = PairedResult(**{**comparison.result.__dict__, "p_holm": adjusted})


def baseline_labels(baselines: list[list[dict[str, Any]]]) -> list[str]:
    """A readable name per baseline: its runs' most common method, numbered if names repeat."""
    names = []
    for i, rows in enumerate(baselines, start=1):
        methods = Counter(str(r.get("method") or "") for r in rows)
        names.append(methods.most_common(1)[0][0] if rows and methods.most_common(1)[0][0] else f"B{i}")
    if len(set(names)) < len(names):
        names = [f"B{i} ({n})" for i, n in enumerate(names, start=1)]
    return names


def render(comparisons: list[Comparison], notes: list[str]) -> list[str]:
    """A Markdown table: difference [95% CI], p (Holm), stars; marked rows flagged."""
    several = len({c.baseline for c in comparisons}) > 1
    lines = [
        "| baseline | metric | length | n | mean A | mean B | A - B [95% CI] | p | p (Holm) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in comparisons:
        r = c.result
        ci = f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}]" if r.ci_low is not None else "[n/a]"
        p = f"{r.p:.4g}" if r.p is not None else "n/a"
        ph = f"{r.p_holm:.4g}{stars(r.p_holm)}" if r.p_holm is not None else "n/a"
        flags = (" (mixed judges)" if c.mixed else "") + (" †" if c.marked else "")
        lines.append(
            f"| {c.baseline} | {c.metric}{flags} | {c.length or '-'} | {r.n} | {r.mean_a:.3f} | "
            f"{r.mean_b:.3f} | {r.diff:+.3f} {ci} | {p} | {ph} |"
        )
    if not comparisons:
        lines.append("| (no paired, scored runs) | | | | | | | | |")
    family = "across the baselines at each length" if several else "across the lengths"
    lines += ["", f"Stars mark p < 0.05, 0.01, 0.001 after Holm's correction within each metric {family}."]
    if any(c.marked for c in comparisons):
        lines.append(
            "† includes runs that are incomplete, out of the length gate or not fully judged (--include-incomplete)."
        )
    if any(c.mixed for c in comparisons):
        lines.append("(mixed judges): some pairs were judged by different judge setups or criteria (--allow-mixed).")
    lines += [f"- {n}" for n in notes]
    return lines
