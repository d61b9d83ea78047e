"""Bootstrap CIs agree with scipy's, and degenerate samples are handled and labelled."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from fixgraph.evaluation.stats import bootstrap_mean


def test_matches_scipy_bca() -> None:
    data = np.random.default_rng(3).binomial(1, 0.6, size=80).astype(float)
    ours = bootstrap_mean(data, resamples=999, confidence=0.9, seed=7)
    theirs = stats.bootstrap(
        (data,), np.mean, n_resamples=999, confidence_level=0.9, method="BCa", rng=np.random.default_rng(7)
    )
    assert ours.method == "BCa"
    assert ours.mean == pytest.approx(data.mean(), abs=1e-12)
    assert ours.low == pytest.approx(theirs.confidence_interval.low, abs=1e-9)
    assert ours.high == pytest.approx(theirs.confidence_interval.high, abs=1e-9)


def test_constant_sample_is_degenerate() -> None:
    est = bootstrap_mean([1.0] * 20)
    assert (est.mean, est.low, est.high, est.method) == (1.0, 1.0, 1.0, "degenerate")


def test_empty_sample() -> None:
    assert bootstrap_mean([]).n == 0


def test_ci_brackets_the_mean() -> None:
    data = np.random.default_rng(0).random(50)
    est = bootstrap_mean(data, resamples=500)
    assert est.low < est.mean < est.high
