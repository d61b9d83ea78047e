"""Paired comparison of two systems on the same questions: a two-sided paired permutation test.

Minimal and self-contained (a general comparison module with multiple-testing corrections lives
elsewhere): the statistic is the mean per-question difference B - A, and the null distribution comes
from randomly swapping A and B within each question (scipy.stats.permutation_test, permutation_type
"samples"), exact when 2^n is at most `resamples`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats


@dataclass(frozen=True)
class PairedResult:
    baseline: str
    system: str
    metric: str
    n: int
    mean_baseline: float
    mean_system: float
    delta: float  # mean(system - baseline)
    p_value: float
    wins: int
    losses: int
    ties: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _mean_difference(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(b - a, axis=axis)


def paired_permutation_test(baseline: np.ndarray, system: np.ndarray, resamples: int = 10000, seed: int = 0) -> float:
    a, b = np.asarray(baseline, dtype=float), np.asarray(system, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"paired test: need two 1-d arrays of equal length, got {a.shape} and {b.shape}")
    if a.size == 0 or np.all(a == b):
        return 1.0
    result = stats.permutation_test(
        (a, b),
        _mean_difference,
        permutation_type="samples",
        alternative="two-sided",
        n_resamples=resamples,
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return float(result.pvalue)


def compare_systems(
    per_question: pd.DataFrame, baseline: str, system: str, metric: str, resamples: int = 10000, seed: int = 0
) -> PairedResult:
    """Paired test on the questions both systems were scored on (rows of the evaluate stage's table)."""
    scored = per_question[per_question["scored"]]
    table = scored.pivot(index="qid", columns="system", values=metric)
    for name in (baseline, system):
        if name not in table.columns:
            raise KeyError(f"paired test: no system {name!r} in the results; have {sorted(table.columns)}")
    pairs = table[[baseline, system]].dropna()
    a, b = pairs[baseline].to_numpy(), pairs[system].to_numpy()
    return PairedResult(
        baseline=baseline,
        system=system,
        metric=metric,
        n=len(pairs),
        mean_baseline=float(a.mean()),
        mean_system=float(b.mean()),
        delta=float((b - a).mean()),
        p_value=paired_permutation_test(a, b, resamples, seed),
        wins=int((b > a).sum()),
        losses=int((b < a).sum()),
        ties=int((b == a).sum()),
    )
