"""P@k, miss classes and per-type breakdowns against hand-worked values (fixtures of test_metrics)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fixgraph.evaluation.breakdown import by_qtype, qtype_markdown
from fixgraph.evaluation.metrics import retrieval_metrics
from fixgraph.evaluation.misses import miss_analysis, miss_counts
from tests.unit.test_metrics import DOC_OF, MAPPING, QUESTIONS, RANKINGS, hits


def test_precision_at_k_by_hand() -> None:
    table = retrieval_metrics(QUESTIONS, MAPPING, RANKINGS, DOC_OF, ks=[1, 2, 4], ndcg_k=4)
    # q1 ranking x, a#1, y, b#0 against {a#0, a#1, b#0}: P@1 0, P@2 1/2, P@4 2/4
    assert table.loc["q1", ["precision_at_1", "precision_at_2", "precision_at_4"]].tolist() == pytest.approx(
        [0.0, 0.5, 0.5]
    )
    # q2 ranking x, y, a#0, c#0 against {c#0}: P@4 = 1/4
    assert table.loc["q2", "precision_at_4"] == pytest.approx(0.25)


def test_miss_classes_by_hand() -> None:
    rankings = {"sys": RANKINGS, "other": {"q1": hits("a#0", "a#1", "b#0"), "q2": hits("c#0")}}
    misses = miss_analysis(QUESTIONS, MAPPING, rankings, k=2, doc_of=DOC_OF)
    sys_rows = misses[misses["system"] == "sys"].sort_values(["qid", "chunk_id"], na_position="last")
    # q1 gold chunks a#0 (not ranked), a#1 (rank 2: a hit), b#0 (rank 4 > 2);
    # q2 c#0 at rank 4, and its second quote was never found in the corpus
    got = [
        (r.qid, None if pd.isna(r.chunk_id) else r.chunk_id, r.miss, None if pd.isna(r.rank) else int(r.rank))
        for r in sys_rows.itertuples()
    ]
    assert got == [
        ("q1", "a#0", "never_retrieved", None),
        ("q1", "b#0", "ranked_below_k", 4),
        ("q2", "c#0", "ranked_below_k", 4),
        ("q2", None, "not_mappable", None),
    ]
    # a#0's page is in sys's top 2 (through a#1): a within-page miss; b#0's and c#0's pages are not
    within = {(r.qid, r.chunk_id): r.page_in_top_k for r in sys_rows.itertuples() if not pd.isna(r.chunk_id)}
    assert within == {("q1", "a#0"): True, ("q1", "b#0"): False, ("q2", "c#0"): False}
    assert sys_rows["page_in_top_k"].isna().sum() == 1  # the unmappable quote has no page to rank
    counts = miss_counts(misses, ["sys", "other"])
    assert counts["sys"] == {
        "ranked_below_k": 2,
        "never_retrieved": 1,
        "not_mappable": 1,
        "total": 4,
        "page_in_top_k": 1,
    }
    # `other` has a#0 and a#1 in its top 2, b#0 at rank 3; c#0 first; the unmappable quote stays a miss
    assert counts["other"] == {
        "ranked_below_k": 1,
        "never_retrieved": 0,
        "not_mappable": 1,
        "total": 2,
        "page_in_top_k": 0,
    }
    assert "q3" not in set(misses["qid"])  # unanswerable: nothing to miss


def test_breakdown_by_question_type_matches_scipy() -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "system": ["a"] * 30,
            "qid": [f"q{i}" for i in range(30)],
            "qtype": ["direct"] * 20 + ["bridge"] * 10,
            "scored": [True] * 28 + [False] * 2,
            "recall_at_8": rng.random(30),
        }
    )
    table = by_qtype(frame, ["recall_at_8"], resamples=500, confidence=0.9, seed=1)
    bridge = table[table["qtype"] == "bridge"].iloc[0]
    values = frame["recall_at_8"].to_numpy()[20:28]  # the two unscored rows are left out
    ref = stats.bootstrap((values,), np.mean, n_resamples=500, confidence_level=0.9, rng=np.random.default_rng(1))
    assert bridge["n"] == 8 and bridge["mean"] == pytest.approx(values.mean())
    assert (bridge["ci_low"], bridge["ci_high"]) == pytest.approx(
        (ref.confidence_interval.low, ref.confidence_interval.high), abs=1e-9
    )
    assert "| a " in qtype_markdown(table, "recall_at_8")
