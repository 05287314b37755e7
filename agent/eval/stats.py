"""Paired statistics (NstAgent C.4): paired t-test, seeded bootstrap CI, Holm correction.

Written with the standard library and numpy only (scipy is not a dependency); the tests
check every function against scipy's results on the same data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

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
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    n = d.size
    if n < 2:
        return None, None
    sd = float(np.std(d, ddof=1))
    mean = float(np.mean(d))
    if sd == 0.0:
        return (None, None) if mean == 0.0 else (math.copysign(math.inf, mean), 0.0)
    t = mean / (sd / math.sqrt(n))
    return t, t_two_sided_p(t, n - 1)


def bootstrap_ci(d: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED,
                 level: float = 0.95) -> tuple[float, float] | None:
    """Percentile bootstrap CI of the mean of ``d``: ``resamples`` resamples of the pairs with a
    seeded generator, so the same data always gives the same interval."""
    x = np.asarray(d, dtype=float)
    if x.size == 0:
        return None
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.percentile(means, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


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


def paired(a: Sequence[float], b: Sequence[float], *, resamples: int = BOOTSTRAP_RESAMPLES,
           seed: int = BOOTSTRAP_SEED) -> PairedResult:
    if len(a) != len(b):
        raise ValueError("paired samples must have the same length")
    n = len(a)
    d = [x - y for x, y in zip(a, b, strict=True)]
    t, p = paired_t(a, b)
    ci = bootstrap_ci(d, resamples=resamples, seed=seed)
    sem = float(np.std(d, ddof=1) / math.sqrt(n)) if n >= 2 else None
    return PairedResult(n, float(np.mean(a)) if n else math.nan, float(np.mean(b)) if n else math.nan,
                        float(np.mean(d)) if n else math.nan, sem, t, p,
                        ci[0] if ci else None, ci[1] if ci else None)


def stars(p: float | None) -> str:
    if p is None:
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


def mean_sem(values: Sequence[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    x = np.asarray(values, dtype=float)
    return float(x.mean()), (float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else None)
