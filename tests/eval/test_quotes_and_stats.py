"""Quote verification; t-test, bootstrap and Holm against scipy (values recorded from scipy 1.17.1)."""

from __future__ import annotations

import numpy as np
import pytest

from agent.eval.quotes import normalize, occurs
from agent.eval.stats import bootstrap_ci, holm, paired, paired_t, t_two_sided_p

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


@pytest.mark.parametrize(("t", "df", "expected"), [(0.5, 3, 0.651447964848151), (2.1, 10, 0.06207724420221853),
                                                   (-4.0, 29, 0.00040006394565249173),
                                                   (12.0, 99, 5.130629687897481e-21), (1e-3, 1, 0.9993633804398159)])
def test_t_distribution_matches_scipy(t, df, expected):
    # 2 * scipy.stats.t.sf(abs(t), df)
    assert t_two_sided_p(t, df) == pytest.approx(expected, rel=1e-9)


def test_bootstrap_matches_scipy_percentile_bootstrap():
    d = np.array(A) - np.array(B)
    # scipy.stats.bootstrap((d,), np.mean, n_resamples=10000, method='percentile',
    #                       random_state=np.random.default_rng(0)).confidence_interval
    assert bootstrap_ci(d, resamples=10_000, seed=0) == pytest.approx((-1.0, -0.27500000000000013), abs=1e-12)
    assert bootstrap_ci(d, seed=0) == bootstrap_ci(d, seed=0)
    assert bootstrap_ci(d, seed=1) != bootstrap_ci(d, seed=0)


def test_against_scipy_when_installed():
    st = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(5)
    a, b = rng.normal(5, 2, 30), rng.normal(5.5, 2, 30)
    ref = st.ttest_rel(a, b)
    assert paired_t(a, b) == pytest.approx((ref.statistic, ref.pvalue), rel=1e-9)
    ci = st.bootstrap((a - b,), np.mean, n_resamples=10_000, method="percentile",
                      random_state=np.random.default_rng(3)).confidence_interval
    assert bootstrap_ci(a - b, seed=3) == pytest.approx((ci.low, ci.high), rel=1e-12)


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
    assert r.n == 8 and r.diff == pytest.approx(np.mean(np.array(A) - np.array(B)))
    assert r.ci_low < r.diff < r.ci_high
