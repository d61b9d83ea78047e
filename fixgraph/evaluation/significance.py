"""Paired statistics for comparing systems on the same questions.

- Bootstrap CIs of means and of paired mean differences: `scipy.stats.bootstrap`, BCa with a
  percentile fallback where BCa degenerates; the method used is recorded per estimate
  (`stats.bootstrap_mean`, one scipy call per row).
- Paired permutation test: the sign-flip test of `scipy.stats.permutation_test(..., permutation_type=
  "samples")` on the mean difference. `engine="scipy"` calls scipy once per comparison. The default
  `engine="fast"` reproduces scipy's random stream and p-value rule exactly, but draws the sign flips
  once and applies them to every comparison with numpy: scipy's paired path loops in Python over the
  observations, ~0.3 s per comparison at n=200, which is too slow for reports with dozens of
  comparisons. tests/unit/test_significance.py checks that both engines agree to 1e-9.
- Holm correction: `statsmodels.stats.multitest.multipletests(method="holm")`.
- Effect sizes: mean difference, Cohen's d_z (mean difference / sd of the differences), wins/ties/losses.

p-values are never 0: a randomised test counts the observed statistic among the permutations
((hits + 1) / (permutations + 1), Phipson & Smyth 2010), and an exact test includes the identity.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import product
from typing import Literal

import numpy as np

from fixgraph.evaluation.stats import Estimate, bootstrap_mean

Engine = Literal["fast", "scipy"]
# scipy's relative tolerance for null statistics that equal the observed one up to rounding
_TIE_TOLERANCE = float(np.finfo(np.float64).eps) * 100


def bootstrap_means(rows: np.ndarray, resamples: int = 2000, confidence: float = 0.95, seed: int = 0) -> list[Estimate]:
    """Mean with a bootstrap CI for each row of a 2-D array (rows: samples, columns: paired questions).

    One scipy call per row, not one batched call: scipy resamples the same indices for every row of a
    batch, but averages a 3-D array in another order, and with tie-heavy metrics (recall over a few
    chunks) a 1e-16 difference moves BCa's bias correction and the interval to a neighbouring value.
    Per row, each CI is exactly the one `report.summarise` prints for the same questions.
    """
    data = np.atleast_2d(np.asarray(rows, dtype=float))
    return [bootstrap_mean(row, resamples, confidence, seed) for row in data]


@dataclass(frozen=True)
class PermutationResult:
    statistic: float  # observed mean difference
    p_value: float
    permutations: int  # number of sign patterns the null distribution holds
    exact: bool  # every sign pattern enumerated (n small) rather than sampled


@lru_cache(maxsize=4)  # one report tests every metric on the same questions: draw the flips once
def _sign_flips(n: int, permutations: int, seed: int) -> tuple[np.ndarray, bool]:
    """The sign patterns scipy's paired test uses for n observations: (patterns x n) of +-1, exact?"""
    if permutations >= 2**n:
        # scipy enumerates every pattern (itertools.product over the pair orders); the order is irrelevant
        signs, exact = np.array(list(product((1.0, -1.0), repeat=n))), True
    else:
        # scipy: rng.permuted(tile(arange(2), (permutations, n, 1)), axis=-1); a pair is swapped when its
        # first index comes out as 1, which negates that observation's difference.
        rng = np.random.default_rng(seed)
        order = rng.permuted(np.tile(np.arange(2), (permutations, n, 1)), axis=-1)
        signs, exact = np.where(order[..., 0] == 1, -1.0, 1.0), False
    signs.flags.writeable = False
    return signs, exact


def _p_value(null: np.ndarray, observed: float, exact: bool) -> float:
    """scipy.stats.permutation_test's two-sided rule, including its tie tolerance and +1 adjustment."""
    adjustment = 0 if exact else 1
    gamma = abs(_TIE_TOLERANCE * observed)
    less = (np.count_nonzero(null <= observed + gamma) + adjustment) / (null.shape[0] + adjustment)
    greater = (np.count_nonzero(null >= observed - gamma) + adjustment) / (null.shape[0] + adjustment)
    return float(min(max(2 * min(less, greater), 0.0), 1.0))


def paired_permutation_tests(
    differences: np.ndarray, permutations: int = 10_000, seed: int = 0, engine: Engine = "fast"
) -> list[PermutationResult]:
    """Two-sided paired sign-flip test of mean difference = 0, for each row of `differences`."""
    data = np.atleast_2d(np.asarray(differences, dtype=float))
    n = data.shape[1]
    if n < 2:
        raise ValueError(f"a paired permutation test needs at least 2 questions, got {n}")
    if engine == "scipy":
        return [_scipy_permutation(row, permutations, seed) for row in data]
    if engine != "fast":
        raise ValueError(f"unknown permutation engine {engine!r}; valid: fast, scipy")
    signs, exact = _sign_flips(n, permutations, seed)
    results = []
    for row in data:
        observed = float(np.mean(row))
        # same elementwise products and the same np.mean reduction as scipy's statistic
        null = np.mean(signs * row, axis=-1)
        results.append(PermutationResult(observed, _p_value(null, observed, exact), signs.shape[0], exact))
    return results


def _scipy_permutation(row: np.ndarray, permutations: int, seed: int) -> PermutationResult:
    from scipy import stats  # imported where used: see bootstrap_mean

    result = stats.permutation_test(
        (row,),
        lambda x, axis: np.mean(x, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=permutations,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    count = len(result.null_distribution)
    return PermutationResult(float(result.statistic), float(result.pvalue), count, count == 2 ** len(row))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (statsmodels), in the input order."""
    if not len(p_values):
        return []
    from statsmodels.stats.multitest import multipletests

    _, adjusted, _, _ = multipletests(np.asarray(p_values, dtype=float), method="holm")
    return [float(p) for p in adjusted]


@dataclass(frozen=True)
class EffectSize:
    mean_difference: float
    cohens_dz: float  # mean difference / sample sd of the differences; 0 when every difference is 0
    wins: int
    ties: int
    losses: int


def effect_size(differences: np.ndarray) -> EffectSize:
    d = np.asarray(differences, dtype=float)
    mean = float(d.mean())
    sd = float(d.std(ddof=1)) if d.size > 1 else 0.0
    # every difference equal: no spread, so d_z is 0 (no effect) or infinite (a constant effect)
    dz = mean / sd if sd > 0 else (0.0 if mean == 0 else math.copysign(math.inf, mean))
    return EffectSize(mean, dz, int((d > 0).sum()), int((d == 0).sum()), int((d < 0).sum()))
