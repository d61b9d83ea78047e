"""Our paired statistics agree with scipy / statsmodels to 1e-9, and with hand-derived values."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from fixgraph.evaluation.significance import (
    bootstrap_means,
    effect_size,
    holm,
    paired_permutation_tests,
)
from fixgraph.evaluation.stats import bootstrap_mean


def _scipy_paired_p(x: np.ndarray, y: np.ndarray, permutations: int, seed: int) -> float:
    """scipy's own two-sample paired test, as a user would call it (not our one-sample form)."""
    result = stats.permutation_test(
        (x, y),
        lambda a, b, axis: np.mean(a - b, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=permutations,
        rng=np.random.default_rng(seed),
    )
    return float(result.pvalue)


@pytest.mark.parametrize("kind", ["continuous", "binary", "graded"])
@pytest.mark.parametrize("seed", [0, 1])
def test_permutation_p_values_match_scipy(kind: str, seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    n, rows = 60, 3
    if kind == "continuous":
        x, y = rng.random((rows, n)), rng.random((rows, n))
    elif kind == "binary":
        x, y = rng.integers(0, 2, (rows, n)).astype(float), rng.integers(0, 2, (rows, n)).astype(float)
    else:  # reciprocal ranks: many ties, the tie tolerance matters
        x, y = 1 / rng.integers(1, 6, (rows, n)), 1 / rng.integers(1, 6, (rows, n))
    fast = paired_permutation_tests(x - y, permutations=2000, seed=seed)
    slow = paired_permutation_tests(x - y, permutations=2000, seed=seed, engine="scipy")
    for i in range(rows):
        expected = _scipy_paired_p(x[i], y[i], 2000, seed)
        assert fast[i].p_value == pytest.approx(expected, abs=1e-9)
        assert slow[i].p_value == pytest.approx(expected, abs=1e-9)
        assert fast[i].statistic == pytest.approx(float(np.mean(x[i] - y[i])), abs=1e-12)
        assert not fast[i].exact and fast[i].permutations == 2000


def test_exact_test_matches_brute_force_enumeration() -> None:
    """n=9: 512 sign patterns <= permutations, so the test is exact; derive p by enumerating them here."""
    d = np.array([0.5, -0.2, 0.3, 0.0, 0.7, 0.1, -0.4, 0.25, 0.6])
    null = np.array([np.mean(np.array(signs) * d) for signs in itertools.product((1, -1), repeat=d.size)])
    expected = np.mean(np.abs(null) >= abs(d.mean()) - 1e-12)  # symmetric null: two-sided = |T| >= |t|
    (result,) = paired_permutation_tests(d, permutations=10_000, seed=3)
    assert result.exact and result.permutations == 512
    assert result.p_value == pytest.approx(expected, abs=1e-9)
    (via_scipy,) = paired_permutation_tests(d, permutations=10_000, seed=3, engine="scipy")
    assert via_scipy.exact and via_scipy.p_value == pytest.approx(expected, abs=1e-9)


def test_p_value_is_never_zero() -> None:
    # every difference positive: no sign pattern but the identity reaches the observed mean, so the
    # randomised p is 2 * (0 + 1) / (permutations + 1), never 0
    d = np.linspace(0.1, 1.0, 200)
    (result,) = paired_permutation_tests(d, permutations=999, seed=0)
    assert result.p_value == pytest.approx(2 / 1000, abs=1e-12)
    (identical,) = paired_permutation_tests(np.zeros(50), permutations=999, seed=0)
    assert identical.p_value == 1.0


def test_permutation_results_do_not_depend_on_batching() -> None:
    rng = np.random.default_rng(7)
    d = rng.normal(0.05, 0.3, (5, 80))
    together = [r.p_value for r in paired_permutation_tests(d, 1000, seed=1)]
    apart = [paired_permutation_tests(row, 1000, seed=1)[0].p_value for row in d]
    assert together == apart


def test_holm_matches_statsmodels_and_hand_values() -> None:
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06], abs=1e-12)  # by hand
    p = np.random.default_rng(5).random(12) ** 3
    assert holm(p.tolist()) == pytest.approx(multipletests(p, method="holm")[1].tolist(), abs=1e-12)
    assert holm([]) == []


def test_bootstrap_of_many_rows_matches_scipy_per_row() -> None:
    data = np.random.default_rng(11).random((3, 70))
    ours = bootstrap_means(data, resamples=999, confidence=0.9, seed=4)
    for row, est in zip(data, ours, strict=True):
        ref = stats.bootstrap(
            (row,), np.mean, n_resamples=999, confidence_level=0.9, method="BCa", rng=np.random.default_rng(4)
        )
        assert est.method == "BCa"
        assert est.low == pytest.approx(ref.confidence_interval.low, abs=1e-9)
        assert est.high == pytest.approx(ref.confidence_interval.high, abs=1e-9)
        single = bootstrap_mean(row, resamples=999, confidence=0.9, seed=4)
        assert (single.low, single.high) == pytest.approx((est.low, est.high), abs=1e-12)


def test_tie_heavy_rows_get_exactly_the_per_row_interval() -> None:
    """Recall over a few chunks takes few values; a batched scipy call would move some BCa bounds."""
    v = np.random.default_rng(0).choice([0, 1 / 3, 1 / 2, 2 / 3, 1.0], (3, 70), p=[0.1, 0.1, 0.1, 0.2, 0.5])
    batched = stats.bootstrap((v,), np.mean, n_resamples=2000, rng=np.random.default_rng(0), axis=-1, vectorized=True)
    ours = bootstrap_means(v, resamples=2000, seed=0)
    moved = 0
    for i, est in enumerate(ours):
        ref = stats.bootstrap((v[i],), np.mean, n_resamples=2000, rng=np.random.default_rng(0))
        assert (est.low, est.high) == pytest.approx(
            (ref.confidence_interval.low, ref.confidence_interval.high), abs=1e-12
        )
        ci = batched.confidence_interval
        moved += max(abs(ci.low[i] - est.low), abs(ci.high[i] - est.high)) > 1e-9
    assert moved  # the batched call really differs here: this test would catch a return to batching


def test_bca_degenerates_to_percentile_and_says_so() -> None:
    # with 3 resamples and seed 3, every bootstrap mean lies on one side of the observed mean: BCa's
    # bias correction is infinite and scipy returns NaN (checked below), so the percentile interval is used
    degenerate = np.array([0.0, 0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 10.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bca = stats.bootstrap((degenerate,), np.mean, n_resamples=3, method="BCa", rng=np.random.default_rng(3))
    assert np.isnan(bca.confidence_interval.low)
    pct = stats.bootstrap((degenerate,), np.mean, n_resamples=3, method="percentile", rng=np.random.default_rng(3))
    (est,) = bootstrap_means(degenerate[None, :], resamples=3, seed=3)
    assert est.method == "percentile"
    assert (est.low, est.high) == pytest.approx((pct.confidence_interval.low, pct.confidence_interval.high), abs=1e-9)
    (constant,) = bootstrap_means(np.ones((1, 10)))
    assert (constant.method, constant.low, constant.high) == ("degenerate", 1.0, 1.0)


def test_effect_size_by_hand() -> None:
    d = np.array([1.0, 0.0, -1.0, 1.0, 1.0])
    effect = effect_size(d)
    assert effect.mean_difference == pytest.approx(0.4)
    # sample sd of [1, 0, -1, 1, 1]: mean 0.4, squares 0.36+0.16+1.96+0.36+0.36 = 3.2, /4 = 0.8
    assert effect.cohens_dz == pytest.approx(0.4 / np.sqrt(0.8))
    assert (effect.wins, effect.ties, effect.losses) == (3, 1, 1)
    assert effect_size(np.zeros(4)).cohens_dz == 0.0
