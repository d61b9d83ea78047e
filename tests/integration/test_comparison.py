"""The comparison experiment and the LLM reranker run from config in the pipeline, recorded in MLflow."""

from __future__ import annotations

import json
from collections.abc import Callable

import mlflow
import pandas as pd
from omegaconf import DictConfig

from fixgraph.experiment.evaluate import evaluate
from fixgraph.experiment.runners import build_experiment

MODEL_FREE = [
    "experiment=reranking",
    "~systems.hybrid_ce",
    "~systems.hybrid_ce_int8",
    "~systems.dense_ce",
    "~systems.hybrid_blend",
    "experiment.compare=[dense,hybrid_weighted,router]",
    "experiment.resamples=999",
]


def test_comparison_experiment_writes_paired_tests(fixture_config: Callable[..., DictConfig]) -> None:
    cfg = fixture_config(MODEL_FREE)
    result = build_experiment(cfg.experiment).run(cfg)
    tests = json.loads((result.output_dir / "comparisons.json").read_text())
    assert {(t["system"], t["metric"]) for t in tests} == {
        (s, m) for s in ("dense", "hybrid_weighted", "router") for m in ("recall_at_8", "mrr", "ndcg_at_10")
    }
    per_question = result.per_question
    for test in tests:  # deltas recomputed from the per-question table
        rows = per_question[per_question["scored"]].pivot(index="qid", columns="system", values=test["metric"])
        assert test["delta"] == (rows[test["system"]] - rows["hybrid"]).mean()
        assert 0 <= test["p_value"] <= 1
    assert "p (paired permutation)" in result.table
    mlflow.set_tracking_uri(str(cfg.tracking.uri))
    metrics = mlflow.get_run(result.mlflow_run_id).data.metrics
    assert metrics["paired.router.mrr.p_value"] == next(
        t["p_value"] for t in tests if t["system"] == "router" and t["metric"] == "mrr"
    )
    # per-stage timings of the hybrid system are recorded per question
    hybrid = per_question[per_question["system"] == "hybrid"]
    for column in ("stage_bm25_ms", "stage_dense_ms", "stage_fusion_ms"):
        assert hybrid[column].notna().all() and (hybrid[column] >= 0).all()


def test_llm_reranker_runs_in_the_pipeline(fixture_config: Callable[..., DictConfig]) -> None:
    cfg = fixture_config(
        [
            "experiment=single",
            "retriever=bm25",
            "tracking.enabled=false",
            "reranker=llm",
            "llm.default=no",
            "+llm.responses={Reset:yes}",
        ]
    )
    result = evaluate(cfg)
    assert isinstance(result.per_question, pd.DataFrame) and (result.per_question["rerank_ms"] >= 0).all()
    run = (result.output_dir / "runs" / "bm25.trec").read_text().splitlines()
    first = next(line for line in run if line.startswith("t-1 "))
    # t-1 asks about the amber light (wifi-trouble); the fake LLM calls only passages containing "Reset"
    # relevant, so the reset-hub page must now come first
    assert first.split()[2].startswith("reset-hub")
