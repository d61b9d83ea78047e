"""Per question-type breakdowns: each metric's mean and bootstrap CI per (system, question type)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from tabulate import tabulate

from fixgraph.evaluation.significance import bootstrap_means


def by_qtype(
    per_question: pd.DataFrame, metrics: Sequence[str], resamples: int, confidence: float, seed: int
) -> pd.DataFrame:
    """Rows (system, qtype, metric, n, mean, ci_low, ci_high, ci_method) over scored questions."""
    scored = per_question[per_question["scored"]] if "scored" in per_question.columns else per_question
    rows = []
    for (system, qtype), group in scored.groupby(["system", "qtype"], sort=True):
        estimates = bootstrap_means(group[list(metrics)].to_numpy(dtype=float).T, resamples, confidence, seed)
        for metric, est in zip(metrics, estimates, strict=True):
            rows.append(
                {
                    "system": system,
                    "qtype": qtype,
                    "metric": metric,
                    "n": est.n,
                    "mean": est.mean,
                    "ci_low": est.low,
                    "ci_high": est.high,
                    "ci_method": est.method,
                }
            )
    return pd.DataFrame(rows, columns=["system", "qtype", "metric", "n", "mean", "ci_low", "ci_high", "ci_method"])


def qtype_markdown(breakdown: pd.DataFrame, metric: str, digits: int = 3) -> str:
    """Systems x question types for one metric, each cell `mean [low, high] (n)`."""
    rows = breakdown[breakdown["metric"] == metric]
    qtypes = sorted(rows["qtype"].unique())
    table = []
    for system in dict.fromkeys(rows["system"]):
        cells: list[str] = [str(system)]
        for qtype in qtypes:
            match = rows[(rows["system"] == system) & (rows["qtype"] == qtype)]
            if match.empty:
                cells.append("")
                continue
            r = match.iloc[0]
            cells.append(f"{r['mean']:.{digits}f} [{r['ci_low']:.{digits}f}, {r['ci_high']:.{digits}f}] ({r['n']})")
        table.append(cells)
    return f"{metric} by question type\n\n" + tabulate(table, headers=["system", *qtypes], tablefmt="github") + "\n"
