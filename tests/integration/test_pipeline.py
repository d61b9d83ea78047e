"""The whole pipeline in-process on the fixture corpus: outputs, caching, MLflow records."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import ir_measures
import pandas as pd
import pytest
from omegaconf import DictConfig

from fixgraph.evaluation.gold import GoldCoverageError
from fixgraph.experiment.evaluate import evaluate
from fixgraph.pipeline import stages


def test_evaluation_outputs_can_be_recomputed_elsewhere(fixture_config: Callable[..., DictConfig]) -> None:
    cfg = fixture_config(["tracking.enabled=false"])
    result = evaluate(cfg)
    out = result.output_dir
    assert sorted(p.name for p in out.iterdir()) == [
        "_run",  # latency: run statistics, outside DVC's hashes
        "by_qtype.md",
        "by_qtype.parquet",
        "gold_mapping.jsonl",
        "info.json",
        "metrics.json",
        "misses.parquet",
        "per_question.parquet",
        "qrels.txt",
        "runs",
        "table.md",
        "unmapped_gold.txt",
    ]
    assert sorted(p.name for p in (out / "_run").iterdir()) == [
        "cost.json",
        "cost.md",
        "latency.json",
        "timings.parquet",
    ]
    assert not [c for c in pd.read_parquet(out / "per_question.parquet").columns if c.endswith("_ms")]
    assert result.coverage == 1.0
    assert result.info["questions"] == 5 and result.info["scored_questions"] == 4
    # the TREC files reproduce our per-question metrics in trec_eval
    qrels = list(ir_measures.read_trec_qrels(str(out / "qrels.txt")))
    for system in ("bm25", "dense", "hybrid"):
        run = list(ir_measures.read_trec_run(str(out / "runs" / f"{system}.trec")))
        theirs = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.R @ 8], qrels, run)}
        ours = result.per_question.query("system == @system and scored").set_index("qid")["recall_at_8"]
        assert ours.to_dict() == pytest.approx(theirs)
    # chunks are readable as parquet with ids, offsets and text
    chunks = pd.read_parquet(Path(cfg.paths.artifacts) / "chunks" / "mallard_folder" / "chunks.parquet")
    assert {"id", "doc_id", "start", "end", "text"} <= set(chunks.columns)
    table = (out / "table.md").read_text()
    assert table.startswith("| system") and "hybrid" in table


def test_stages_are_skipped_when_nothing_changed(fixture_config: Callable[..., DictConfig]) -> None:
    cfg = fixture_config()
    assert stages.chunk(cfg).status == "built"
    assert stages.chunk(cfg).status == "cached"
    chunks = stages.load_chunks(cfg)
    system = cfg.systems.bm25
    assert stages.index(cfg, "bm25", system, chunks).status == "built"
    assert stages.index(cfg, "bm25", system, chunks).status == "cached"
    changed = fixture_config(["systems.bm25.k1=1.7"])
    assert stages.index(changed, "bm25", changed.systems.bm25, chunks).status == "built"
    assert stages.chunk(fixture_config(["chunker.max_tokens=20"])).status == "built"


def test_low_gold_coverage_fails_loudly(fixture_config: Callable[..., DictConfig], tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"qid": "x", "question": "?", "gold": [{"page": "battery", "quote": "no such text"}]}))
    with pytest.raises(GoldCoverageError, match=r"only 0\.0% of 1 gold quotes"):
        evaluate(fixture_config(["tracking.enabled=false"]), questions_path=bad)


def test_mlflow_records_parent_and_system_runs(fixture_config: Callable[..., DictConfig]) -> None:
    import mlflow

    cfg = fixture_config()
    result = evaluate(cfg)
    assert result.mlflow_run_id
    mlflow.set_tracking_uri(str(cfg.tracking.uri))
    parent = mlflow.get_run(result.mlflow_run_id)
    for tag in ("git_sha", "corpus_hash", "questions_hash", "chunks_hash", "pkg.torch"):
        assert parent.data.tags.get(tag), tag
    assert parent.data.params["embedder.name"] == "hashing"
    children = mlflow.search_runs(
        experiment_ids=[parent.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{result.mlflow_run_id}'",
        output_format="list",
    )
    assert sorted(r.data.tags["system"] for r in children) == ["bm25", "dense", "hybrid"]
    for child in children:
        metrics = child.data.metrics
        assert metrics["recall_at_8_ci_low"] <= metrics["recall_at_8"] <= metrics["recall_at_8_ci_high"]
        assert child.data.params["retriever.name"] == child.data.tags["system"]
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(result.mlflow_run_id)}
    assert {"config.yaml", "packages.json", "per_question.csv", "evaluation"} <= artifacts
