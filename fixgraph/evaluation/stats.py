"""Confidence intervals for per-question means (scipy.stats.bootstrap)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Estimate:
    mean: float
    low: float
    high: float
    n: int
    method: str  # BCa | percentile | degenerate

    def format(self, digits: int = 3) -> str:
        return f"{self.mean:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


def bootstrap_mean(
    values: Sequence[float] | np.ndarray, resamples: int = 2000, confidence: float = 0.95, seed: int = 0
) -> Estimate:
    """Mean with a bootstrap CI: BCa, falling back to percentile when BCa degenerates.

    The method actually used is recorded, since a percentile interval is not a BCa interval.
    """
    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0, "degenerate")
    mean = float(data.mean())
    if data.size < 2 or np.all(data == data[0]):
        return Estimate(mean, mean, mean, int(data.size), "degenerate")
    from scipy import stats  # here, not at the top: scipy.stats costs every command ~1 s to import

    for method in ("BCa", "percentile"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy warns when BCa degenerates; we check for NaN ourselves
            result = stats.bootstrap(
                (data,),
                np.mean,
                n_resamples=resamples,
                confidence_level=confidence,
                method=method.lower() if method == "percentile" else method,
                rng=np.random.default_rng(seed),
                vectorized=True,
            )
        low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
        if np.isfinite(low) and np.isfinite(high):
            return Estimate(mean, low, high, int(data.size), method)
    return Estimate(mean, mean, mean, int(data.size), "degenerate")
