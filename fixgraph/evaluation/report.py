"""Summaries of per-question metrics: means with bootstrap CIs, as JSON and as a markdown table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from tabulate import tabulate

from fixgraph.evaluation.stats import Estimate, bootstrap_mean

ID_COLUMNS = ("system", "qid", "qtype", "scored")


def metric_columns(per_question: pd.DataFrame) -> list[str]:
    return [c for c in per_question.columns if c not in ID_COLUMNS and not c.endswith("_ms")]


def summarise(
    per_question: pd.DataFrame, resamples: int, confidence: float, seed: int
) -> dict[str, dict[str, Estimate]]:
    """system -> metric -> mean with CI, over the questions each system was scored on."""
    summary: dict[str, dict[str, Estimate]] = {}
    for system, rows in per_question.groupby("system", sort=False):
        summary[str(system)] = {
            metric: bootstrap_mean(rows[metric].dropna().to_numpy(), resamples, confidence, seed)
            for metric in metric_columns(per_question)
        }
    return summary


def summary_json(summary: dict[str, dict[str, Estimate]]) -> dict[str, Any]:
    return {system: {metric: est.__dict__ for metric, est in metrics.items()} for system, metrics in summary.items()}


def markdown_table(summary: dict[str, dict[str, Estimate]], metrics: Sequence[str], confidence: float) -> str:
    """Systems x metrics, each cell `mean [low, high]`."""
    header = ["system", *metrics]
    rows = [[system, *(summary[system][m].format() for m in metrics)] for system in summary]
    n = next(iter(next(iter(summary.values())).values())).n if summary else 0
    caption = f"Mean [{confidence:.0%} bootstrap CI] over {n} scored questions."
    return tabulate(rows, headers=header, tablefmt="github") + "\n\n" + caption + "\n"


def latency_summary(per_question: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per system and timed stage: median and 95th percentile milliseconds per query."""
    out: dict[str, dict[str, float]] = {}
    timed = [c for c in per_question.columns if c.endswith("_ms")]
    for system, rows in per_question.groupby("system", sort=False):
        out[str(system)] = {}
        for column in timed:
            out[str(system)][f"{column[:-3]}_p50_ms"] = float(rows[column].quantile(0.5))
            out[str(system)][f"{column[:-3]}_p95_ms"] = float(rows[column].quantile(0.95))
    return out
