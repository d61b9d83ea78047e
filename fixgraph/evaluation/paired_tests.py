"""Paired comparisons of systems against a baseline on the same questions.

For each (system, metric): the mean per-question difference system - baseline, a two-sided paired
permutation test (scipy.stats.permutation_test, `permutation_type="samples"`: the sign of each
question's difference is flipped at random), and Holm's correction (statsmodels) over the family of
every (system, metric) pair tested -- the baseline itself is not part of the family.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

COLUMNS = [
    "system",
    "baseline",
    "metric",
    "n",
    "mean_system",
    "mean_baseline",
    "mean_diff",
    "p_value",
    "p_holm",
    "significant",
]


def _mean_diff(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x - y, axis=axis)


def paired_permutation_test(a: np.ndarray, b: np.ndarray, resamples: int, seed: int) -> float:
    """Two-sided p-value of mean(a - b) = 0 under random sign flips of the paired differences."""
    if len(a) < 2 or np.allclose(a, b):
        return 1.0
    result = stats.permutation_test(
        (a, b),
        _mean_diff,
        permutation_type="samples",
        n_resamples=resamples,
        alternative="two-sided",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return float(result.pvalue)


def paired_tests(
    per_question: pd.DataFrame,
    baseline: str,
    metrics: Sequence[str],
    resamples: int = 10000,
    seed: int = 0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """One row per (system != baseline, metric), on the questions scored for both systems."""
    from statsmodels.stats.multitest import multipletests

    if baseline not in set(per_question["system"]):
        raise KeyError(f"paired tests: baseline {baseline!r} is not among the evaluated systems")
    scored = per_question[per_question["scored"]]
    base = scored[scored["system"] == baseline].set_index("qid")
    rows = []
    for system in [s for s in dict.fromkeys(scored["system"]) if s != baseline]:
        other = scored[scored["system"] == system].set_index("qid")
        for metric in metrics:
            joined = pd.concat([other[metric].rename("s"), base[metric].rename("b")], axis=1, join="inner").dropna()
            a, b = joined["s"].to_numpy(float), joined["b"].to_numpy(float)
            rows.append(
                {
                    "system": system,
                    "baseline": baseline,
                    "metric": metric,
                    "n": len(joined),
                    "mean_system": float(a.mean()) if len(a) else float("nan"),
                    "mean_baseline": float(b.mean()) if len(b) else float("nan"),
                    "mean_diff": float((a - b).mean()) if len(a) else float("nan"),
                    "p_value": paired_permutation_test(a, b, resamples, seed),
                }
            )
    table = pd.DataFrame(rows, columns=COLUMNS)
    if len(table):
        reject, corrected, _, _ = multipletests(table["p_value"].to_numpy(), alpha=alpha, method="holm")
        table["p_holm"] = corrected
        table["significant"] = reject
    return table


def markdown(table: pd.DataFrame) -> str:
    from tabulate import tabulate

    shown = table.assign(
        mean_diff=table["mean_diff"].map(lambda v: f"{v:+.3f}"),
        p_value=table["p_value"].map(lambda v: f"{v:.4f}"),
        p_holm=table["p_holm"].map(lambda v: f"{v:.4f}"),
    )[["system", "metric", "n", "mean_diff", "p_value", "p_holm", "significant"]]
    baseline = table["baseline"].iloc[0] if len(table) else "?"
    return (
        tabulate(shown.values.tolist(), headers=list(shown.columns), tablefmt="github")
        + f"\n\nPaired permutation tests against {baseline} (two-sided; Holm over all rows).\n"
    )
