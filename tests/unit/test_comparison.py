"""The one-call comparison: numbers from scipy/statsmodels, the family rule, unpaired data refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
from statsmodels.stats.multitest import multipletests

from fixgraph.evaluation.comparison import ComparisonError, ComparisonSettings, Family, compare


def _long_table(values: dict[str, dict[str, np.ndarray]], qids: list[str]) -> pd.DataFrame:
    rows = []
    for system, metrics in values.items():
        for i, qid in enumerate(qids):
            rows.append({"system": system, "qid": qid, **{m: float(v[i]) for m, v in metrics.items()}})
    return pd.DataFrame(rows)


@pytest.fixture
def table() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    qids = [f"q{i:03d}" for i in range(40)]
    values = {
        s: {"recall": rng.integers(0, 2, 40).astype(float), "mrr": rng.random(40) * shift}
        for s, shift in (("bm25", 0.6), ("dense", 1.0), ("hybrid", 0.9))
    }
    return _long_table(values, qids)


def test_numbers_come_from_scipy_and_statsmodels(table: pd.DataFrame) -> None:
    settings = ComparisonSettings(resamples=500, permutations=999, seed=2)
    family = Family.declare("bm25", ["bm25", "dense", "hybrid"], ["mrr"])
    report = compare(table, ["recall", "mrr"], "bm25", family=family, settings=settings)
    wide = table.pivot(index="qid", columns="system")
    raw = {}
    for system in ("dense", "hybrid"):
        for metric in ("recall", "mrr"):
            x, y = wide[(metric, system)].to_numpy(), wide[(metric, "bm25")].to_numpy()
            row = report.row(system, metric)
            p = stats.permutation_test(
                (x, y),
                lambda a, b, axis: np.mean(a - b, axis=axis),
                permutation_type="samples",
                vectorized=True,
                n_resamples=999,
                rng=np.random.default_rng(2),
            ).pvalue
            ci = stats.bootstrap(
                (x, y),
                lambda a, b, axis: np.mean(a - b, axis=axis),
                paired=True,
                vectorized=True,
                n_resamples=500,
                rng=np.random.default_rng(2),
            ).confidence_interval
            assert row["p"] == pytest.approx(p, abs=1e-9)
            assert row["diff"] == pytest.approx(np.mean(x - y), abs=1e-12)
            assert (row["diff_ci_low"], row["diff_ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-9)
            raw[(system, metric)] = p
    holm = multipletests([raw[("dense", "mrr")], raw[("hybrid", "mrr")]], method="holm")[1]
    assert report.row("dense", "mrr")["p_holm"] == pytest.approx(holm[0], abs=1e-12)
    assert report.row("hybrid", "mrr")["p_holm"] == pytest.approx(holm[1], abs=1e-12)
    # recall was not in the declared family: exploratory, no corrected p
    assert np.isnan(report.row("dense", "recall")["p_holm"])
    assert not report.row("dense", "recall")["in_family"]
    assert "p_Holm" in report.markdown() and "bm25 (baseline)" in report.markdown()
    assert report.to_json()["family"]["baseline"] == "bm25"
    assert set(report.per_query["system"]) == {"dense", "hybrid"}
    assert len(report.per_query) == 2 * 2 * 40


@given(
    systems=st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=8),
    baseline=st.sampled_from(["a", "b", "c"]),
    metrics=st.lists(st.sampled_from(["r", "m", "n"]), min_size=1, max_size=3),
)
def test_baseline_is_never_in_its_own_family(systems: list[str], baseline: str, metrics: list[str]) -> None:
    candidates = [*systems, baseline]
    if set(candidates) == {baseline}:
        with pytest.raises(ComparisonError, match="at least one"):
            Family.declare(baseline, candidates, metrics)
        return
    family = Family.declare(baseline, candidates, metrics)
    assert all(system != baseline for system, _ in family.hypotheses)
    assert {s for s, _ in family.hypotheses} == set(candidates) - {baseline}
    with pytest.raises(ComparisonError, match="cannot be in its own family"):
        Family(baseline, (*family.hypotheses, (baseline, metrics[0])))


def test_family_from_another_baseline_or_outside_the_comparison_is_refused(table: pd.DataFrame) -> None:
    with pytest.raises(ComparisonError, match="declared against 'dense'"):
        compare(table, ["mrr"], "bm25", family=Family.declare("dense", ["bm25"], ["mrr"]))
    with pytest.raises(ComparisonError, match="outside this comparison"):
        compare(table, ["mrr"], "bm25", family=Family("bm25", (("dense", "ndcg"),)))


def test_unpaired_questions_are_refused(table: pd.DataFrame) -> None:
    holed = table[~((table["system"] == "dense") & (table["qid"] == "q007"))]
    with pytest.raises(ComparisonError, match=r"not paired.*'q007' for dense"):
        compare(holed, ["mrr"], "bm25")
    with pytest.raises(ComparisonError, match="baseline 'nope'"):
        compare(table, ["mrr"], "nope")
    with pytest.raises(ComparisonError, match="unknown metric"):
        compare(table, ["ndcg"], "bm25")


def test_system_cis_equal_the_evaluation_table(table: pd.DataFrame) -> None:
    """The comparison's per-system CI is the one report.summarise prints (same questions, same order)."""
    from fixgraph.evaluation.stats import bootstrap_mean

    shuffled = table.sample(frac=1.0, random_state=3)  # any row order: questions follow first appearance
    report = compare(shuffled, ["mrr"], "bm25", settings=ComparisonSettings(resamples=300, permutations=99))
    for system in ("bm25", "dense"):
        order = list(dict.fromkeys(shuffled["qid"]))
        values = shuffled[shuffled["system"] == system].set_index("qid").loc[order, "mrr"].to_numpy()
        est = bootstrap_mean(values, resamples=300, confidence=0.95, seed=0)
        row = report.row(system, "mrr")
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((est.low, est.high), abs=1e-12)
