"""Paired statistics (NstAgent C.4): paired t-test, seeded bootstrap CI, Holm correction,
and Kendall's tau-b (NstAgent B.1).

Standard library only, so ``fabula eval compare`` and ``eval report`` work in a base install
(numpy and scipy belong to no base dependency). The bootstrap draws from ``random.Random``
seeded per call, so the same data and seed always give the same interval on every machine;
the tests check every function against scipy on the same data.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import fmean, stdev

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 3e-16
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_two_sided_p(t: float, df: float) -> float:
    """Two-sided p-value of Student's t with ``df`` degrees of freedom."""
    if math.isinf(t):
        return 0.0
    return betainc(df / 2.0, 0.5, df / (df + t * t))


@dataclass(frozen=True)
class PairedResult:
    n: int
    mean_a: float
    mean_b: float
    diff: float
    """Mean of the per-pair differences ``a - b``."""
    sem: float | None
    t: float | None
    p: float | None
    ci_low: float | None
    ci_high: float | None
    p_holm: float | None = None


def paired_t(a: Sequence[float], b: Sequence[float]) -> tuple[float | None, float | None]:
    """``(t, p)`` of the paired t-test (two-sided); ``None`` when undefined (n < 2 or zero variance
    with zero mean difference, where scipy also gives nan)."""
    d = [float(x) - float(y) for x, y in zip(a, b, strict=True)]
    n = len(d)
    if n < 2:
        return None, None
    sd = stdev(d)
    mean = fmean(d)
    if sd == 0.0:
        return (None, None) if mean == 0.0 else (math.copysign(math.inf, mean), 0.0)
    t = mean / (sd / math.sqrt(n))
    return t, t_two_sided_p(t, n - 1)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of already sorted values, linearly interpolated between
    the closest ranks (numpy's default ``linear`` method)."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def bootstrap_ci(
    d: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED, level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile bootstrap CI of the mean of ``d``: ``resamples`` resamples of the pairs with a
    seeded generator, so the same data always gives the same interval."""
    x = [float(v) for v in d]
    n = len(x)
    if n == 0:
        return None
    rng = random.Random(seed)
    draw = rng.choices
    means = sorted(math.fsum(draw(x, k=n)) / n for _ in range(resamples))
    alpha = (1.0 - level) / 2.0
    return percentile(means, 100 * alpha), percentile(means, 100 * (1 - alpha))


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm-Bonferroni adjusted p-values (step-down, monotone, capped at 1); ``None`` stays out."""
    indexed = sorted((p, i) for i, p in enumerate(pvalues) if p is not None)
    m = len(indexed)
    out: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(indexed):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out


def paired(
    a: Sequence[float], b: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> PairedResult:
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    n = len(a)
    d = [float(x) - float(y) for x, y in zip(a, b, strict=True)]
    t, p = paired_t(a, b)
    ci = bootstrap_ci(d, resamples=resamples, seed=seed)
    sem = stdev(d) / math.sqrt(n) if n >= 2 else None
    return PairedResult(
        n,
        fmean(a) if n else math.nan,
        fmean(b) if n else math.nan,
        fmean(d) if n else math.nan,
        sem,
        t,
        p,
        ci[0] if ci else None,
        ci[1] if ci else None,
    )


def stars(p: float | None) -> str:
    if p is None:
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


def mean_sem(values: Sequence[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    x = [float(v) for v in values]
    return fmean(x), (stdev(x) / math.sqrt(len(x)) if len(x) > 1 else None)


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> tuple[float | None, float | None]:
    """Kendall's tau-b of two paired sequences and its two-sided p-value (normal approximation
    with the tie-corrected variance, as scipy's ``kendalltau`` when there are ties); ``None``
    when either sequence is constant or there are fewer than two pairs."""
    n = len(x)
    if n != len(y):
        raise ValueError("kendall_tau_b needs sequences of the same length")
    concordant = discordant = ties_x = ties_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    if n < 2 or denominator == 0:
        return None, None
    tau = (concordant - discordant) / denominator
    return tau, _kendall_p(concordant - discordant, x, y)


def _tie_sums(values: Sequence[float]) -> tuple[float, float, float]:
    counts: dict[float, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    t = [c for c in counts.values() if c > 1]
    return (
        sum(c * (c - 1) for c in t),
        sum(c * (c - 1) * (c - 2) for c in t),
        sum(c * (c - 1) * (2 * c + 5) for c in t),
    )


def _kendall_p(s: int, x: Sequence[float], y: Sequence[float]) -> float:
    """Two-sided p of ``S = concordant - discordant`` under the tie-corrected null variance."""
    n = len(x)
    x0, x1, x2 = _tie_sums(x)
    y0, y1, y2 = _tie_sums(y)
    m = n * (n - 1)
    variance = (m * (2 * n + 5) - x2 - y2) / 18 + x0 * y0 / (2 * m) + (x1 * y1 / (9 * m * (n - 2)) if n > 2 else 0.0)
    if variance <= 0:
        return 1.0
    z = abs(s) / math.sqrt(variance)
    return math.erfc(z / math.sqrt(2))
