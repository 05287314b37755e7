"""Quote verification; t-test, bootstrap, Holm and Kendall's tau against scipy (values recorded
from scipy 1.17.1, and cross-checked live where scipy is installed)."""

from __future__ import annotations

import random
from statistics import fmean

import pytest

from agent.eval.stats import bootstrap_ci, holm, kendall_tau_b, paired, paired_t, percentile, t_two_sided_p
from agent.quotes import normalize, occurs

A = [3.1, 2.4, 5.0, 4.2, 3.3, 6.1, 2.2, 4.8]
B = [4.0, 2.9, 5.5, 4.1, 4.4, 6.0, 3.5, 5.9]


def test_quotes_tolerate_whitespace_and_typography_only():
    text = normalize("She said, \u201cThe door was   red.\u201d\nThen she\tleft\u2014quickly.")
    assert occurs('said, "The door was red."', text)
    assert occurs("Then she left-quickly.", text)
    assert occurs("  The door\nwas red ", text)
    assert not occurs("The door was blue", text)
    assert not occurs("the door was red", text)  # case matters
    assert not occurs("The door ... red", text)  # no elisions
    assert not occurs("   ", text)


def test_paired_t_matches_scipy():
    t, p = paired_t(A, B)
    # scipy.stats.ttest_rel(A, B)
    assert t == pytest.approx(-3.3890170983935564, rel=1e-12)
    assert p == pytest.approx(0.011614982283292509, rel=1e-9)


@pytest.mark.parametrize(
    ("t", "df", "expected"),
    [
        (0.5, 3, 0.651447964848151),
        (2.1, 10, 0.06207724420221853),
        (-4.0, 29, 0.00040006394565249173),
        (12.0, 99, 5.130629687897481e-21),
        (1e-3, 1, 0.9993633804398159),
    ],
)
def test_t_distribution_matches_scipy(t, df, expected):
    # 2 * scipy.stats.t.sf(abs(t), df)
    assert t_two_sided_p(t, df) == pytest.approx(expected, rel=1e-9)


def test_percentile_interpolates_like_numpy_linear():
    values = [1.0, 2.0, 4.0, 8.0, 16.0]
    assert percentile(values, 0) == 1.0 and percentile(values, 100) == 16.0
    assert percentile(values, 50) == 4.0
    assert percentile(values, 2.5) == pytest.approx(1.1)  # position 0.1 between 1 and 2
    assert percentile(values, 97.5) == pytest.approx(8.0 + 0.9 * 8.0)  # position 3.9 between 8 and 16
    assert percentile([3.0], 2.5) == 3.0


def test_bootstrap_is_seeded_and_agrees_with_scipy():
    d = [x - y for x, y in zip(A, B, strict=True)]
    ci = bootstrap_ci(d, resamples=10_000, seed=0)
    # scipy.stats.bootstrap((d,), np.mean, n_resamples=10000, method='percentile') gives
    # (-1.0, -0.275) with numpy's generator; ours draws from random.Random: same estimator,
    # Monte Carlo error of a few thousandths
    assert ci == pytest.approx((-1.0, -0.275), abs=0.03)
    assert ci[0] < fmean(d) < ci[1]
    assert bootstrap_ci(d, seed=0) == ci  # the same seed gives the same interval
    assert bootstrap_ci(d, seed=1) != ci
    assert bootstrap_ci([], seed=0) is None
    assert bootstrap_ci([2.5, 2.5, 2.5], seed=0) == (2.5, 2.5)
    # every resample mean lies between the smallest and largest value: so does the interval
    low, high = bootstrap_ci([0.0, 10.0], resamples=1000, seed=0)
    assert 0.0 <= low < 5.0 < high <= 10.0 and low == 0.0 and high == 10.0


def test_against_scipy_when_installed():
    np = pytest.importorskip("numpy")
    st = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(5)
    a, b = rng.normal(5, 2, 30), rng.normal(5.5, 2, 30)
    ref = st.ttest_rel(a, b)
    assert paired_t(list(a), list(b)) == pytest.approx((ref.statistic, ref.pvalue), rel=1e-9)
    ci = st.bootstrap(
        (a - b,), np.mean, n_resamples=10_000, method="percentile", random_state=np.random.default_rng(3)
    ).confidence_interval
    ours = bootstrap_ci(list(a - b), seed=3)
    width = ci.high - ci.low
    assert ours == pytest.approx((ci.low, ci.high), abs=0.05 * width)
    draw = random.Random(1)
    x = [draw.randint(0, 3) for _ in range(25)]
    y = [draw.random() for _ in range(25)]
    ref_tau = st.kendalltau(x, y, method="asymptotic")
    assert kendall_tau_b(x, y) == pytest.approx((ref_tau.statistic, ref_tau.pvalue), rel=1e-9)


def test_kendall_tau_b_by_hand_and_against_recorded_scipy():
    assert kendall_tau_b([1, 2, 3, 4], [1, 2, 3, 4])[0] == pytest.approx(1.0)
    assert kendall_tau_b([1, 2, 3, 4], [4, 3, 2, 1])[0] == pytest.approx(-1.0)
    assert kendall_tau_b([1, 1, 1], [1, 2, 3]) == (None, None)  # a constant sequence has no ordering
    # detection (0/1) against target length, ties on both sides;
    # scipy.stats.kendalltau(x, y, method='asymptotic') = (-0.32287320150037885, 0.2899581488036569)
    x = [0, 1, 1, 0, 1, 1, 1, 0, 1, 1]
    y = [10, 20, 50, 100, 10, 20, 50, 100, 10, 20]
    assert kendall_tau_b(x, y) == pytest.approx((-0.32287320150037885, 0.2899581488036569), rel=1e-9)


def test_holm_by_hand():
    # sorted 0.01, 0.02, 0.04, 0.30 with m = 4: 0.04, 0.06, 0.08, 0.30; monotone; None kept out
    assert holm([0.04, 0.01, None, 0.30, 0.02]) == pytest.approx([0.08, 0.04, None, 0.30, 0.06])
    # the step-down maximum: 0.02*3 = 0.06 > 0.025*2 = 0.05 -> 0.06 carries; capped at 1
    assert holm([0.02, 0.025, 0.9]) == pytest.approx([0.06, 0.06, 0.9])
    assert holm([0.6, 0.7]) == pytest.approx([1.0, 1.0])


def test_paired_edge_cases():
    assert paired_t([1.0], [2.0]) == (None, None)
    assert paired_t([1.0, 2.0], [1.0, 2.0]) == (None, None)
    r = paired(A, B)
    assert r.n == 8 and r.diff == pytest.approx(fmean(A) - fmean(B))
    assert r.ci_low < r.diff < r.ci_high
