"""Comparison report speed: 10 systems x 6 metrics x 200 questions, 10,000 permutations, 2,000 resamples.

Synthetic per-question scores (seeded) shaped like ours: binary hits, graded reciprocal ranks and
nDCG-like values. Reported: the median wall time of the whole report (means + CIs for every system
and metric, paired difference CIs, permutation p-values, Holm) over a few repeats, and, as the peer
measured in the same run, scipy.stats.permutation_test called per comparison on a subset, with the
largest p-value difference between the two engines (they must agree exactly).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig

from fixgraph.evaluation.comparison import ComparisonSettings, Family, compare
from fixgraph.evaluation.significance import paired_permutation_tests

SYSTEMS, METRICS, QUESTIONS = 10, 6, 200
PERMUTATIONS, RESAMPLES = 10_000, 2_000
REPEATS = 3
PEER_COMPARISONS = 6  # scipy per comparison is ~0.3 s here; a subset keeps the run short


def synthetic(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    systems = [f"s{i}" for i in range(SYSTEMS)]
    skill = rng.normal(0, 1, QUESTIONS)  # question difficulty shared by systems, as in real runs
    rows = []
    for i, system in enumerate(systems):
        strength = 0.05 * i + rng.normal(0, 0.3, QUESTIONS) + skill
        rank = np.clip(np.round(np.exp(1.5 - strength)), 1, 50)
        rows.append(
            pd.DataFrame(
                {
                    "system": system,
                    "qid": [f"q{j:03d}" for j in range(QUESTIONS)],
                    "hit_at_8": (rank <= 8).astype(float),
                    "support_complete_at_8": (rank <= 4).astype(float),
                    "mrr": 1 / rank,
                    "ndcg_at_10": np.where(rank <= 10, 1 / np.log2(rank + 1), 0.0),
                    "recall_at_8": np.clip(rng.beta(2, 2, QUESTIONS) + 0.3 * (rank <= 8), 0, 1),
                    "precision_at_5": np.round(np.clip(rng.beta(1, 3, QUESTIONS) + 0.1 * i / SYSTEMS, 0, 1) * 5) / 5,
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def run(cfg: DictConfig) -> dict[str, Any]:
    table = synthetic(int(cfg.get("seed", 0)))
    metrics = [c for c in table.columns if c not in ("system", "qid")]
    systems = list(dict.fromkeys(table["system"]))
    family = Family.declare(systems[0], systems, metrics)
    settings = ComparisonSettings(resamples=RESAMPLES, permutations=PERMUTATIONS, seed=0)
    times = []
    report = None
    for _ in range(REPEATS):
        started = time.perf_counter()
        report = compare(table, metrics, systems[0], family=family, settings=settings)
        times.append(time.perf_counter() - started)
    assert report is not None

    wide = table.pivot(index="qid", columns="system", values=metrics[0])
    diffs = np.stack([wide[s].to_numpy() - wide[systems[0]].to_numpy() for s in systems[1 : 1 + PEER_COMPARISONS]])
    started = time.perf_counter()
    fast = paired_permutation_tests(diffs, PERMUTATIONS, 0, "fast")
    fast_s = time.perf_counter() - started
    started = time.perf_counter()
    slow = paired_permutation_tests(diffs, PERMUTATIONS, 0, "scipy")
    scipy_s = time.perf_counter() - started
    comparisons = (SYSTEMS - 1) * METRICS
    return {
        "what": "full comparison report: means+BCa CIs, paired diff CIs, permutation p, Holm over the family",
        "systems": SYSTEMS,
        "metrics": METRICS,
        "questions": QUESTIONS,
        "comparisons": comparisons,
        "permutations": PERMUTATIONS,
        "bootstrap_resamples": RESAMPLES,
        "report_seconds_median": round(statistics.median(times), 3),
        "report_seconds_all": [round(t, 3) for t in times],
        "under_10_s": statistics.median(times) < 10,
        "ci_methods": report.table["ci_method"].value_counts().to_dict(),
        "family_size": len(family.hypotheses),
        "peer": {
            "what": f"permutation tests only, {PEER_COMPARISONS} comparisons, scipy.stats.permutation_test per "
            "comparison vs our engine reproducing its random stream",
            "scipy_seconds": round(scipy_s, 3),
            "fast_seconds": round(fast_s, 3),
            "scipy_over_fast": round(scipy_s / fast_s, 1),
            "scipy_seconds_extrapolated_to_report": round(scipy_s / PEER_COMPARISONS * comparisons, 1),
            "max_abs_p_difference": max(abs(a.p_value - b.p_value) for a, b in zip(fast, slow, strict=True)),
        },
    }
