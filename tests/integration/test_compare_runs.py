"""`fixgraph compare` over MLflow runs, with the measurement guard in front of it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from fixgraph.evaluation.protocol_errors import ComparisonError, MeasurementGuardError
from fixgraph.experiment.compare_runs import compare_runs
from fixgraph.experiment.evaluate import evaluate


def _bm25_run(make: Callable[..., DictConfig], *overrides: str) -> tuple[DictConfig, str]:
    cfg = make(["experiment=single", "retriever=bm25", *overrides])
    result = evaluate(cfg)
    assert result.mlflow_run_id
    return cfg, result.mlflow_run_id


def test_compare_runs_guards_and_logs(protocol_config: Callable[..., DictConfig], tmp_path: Path) -> None:
    import mlflow

    cfg, first = _bm25_run(protocol_config)
    _, changed = _bm25_run(protocol_config, "retriever.k1=1.7", "retriever.b=0.9")

    # X against X (tests/unit/test_fingerprint.py covers every rule; here: a run against itself)
    with pytest.raises(ComparisonError, match="at least two system runs"):
        compare_runs(cfg, [first, first], track=False)
    with pytest.raises(MeasurementGuardError, match="same chunks"):
        compare_runs(cfg, [first, changed], axis="chunks", track=False)
    with pytest.raises(ComparisonError, match="no MLflow run 'nope'"):
        compare_runs(cfg, [first, "nope"], track=False)

    out = compare_runs(cfg, [first, changed], axis="retriever", output=tmp_path / "cmp", metrics=["recall_at_8", "mrr"])
    assert "inputs differ on retriever" in out and "p_Holm" in out
    assert {p.name for p in (tmp_path / "cmp" / "plots").iterdir()} == {
        "metrics_ci.png",
        "recall_at_k.png",
        "recall_at_8_by_qtype.png",
    }
    recorded = json.loads((tmp_path / "cmp" / "comparison.json").read_text())
    sides = list(recorded["fingerprints"].values())
    assert len(sides) == 2 and sides[0]["retriever"] != sides[1]["retriever"]
    assert sides[0]["questions"] == sides[1]["questions"] and sides[0]["chunks"] == sides[1]["chunks"]
    assert list(recorded["differing_axes"].values()) == [["retriever"]]
    run_id = out.split("MLflow run ")[1].split()[0]
    mlflow.set_tracking_uri(str(cfg.tracking.uri))
    run = mlflow.get_run(run_id)
    assert run.data.tags["stage"] == "compare" and run.data.tags["axis"] == "retriever"
    assert any(key.endswith(".recall_at_8.p") for key in run.data.metrics)
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(run_id)}
    assert {"comparison.md", "comparison.json", "plots"} <= artifacts

    # selected by tag instead of id: every bm25 system run of this experiment (the two above)
    by_tag = compare_runs(cfg, [], tags=["system=bm25"], track=False, metrics=["mrr"])
    assert by_tag.count("inputs differ on retriever") == 1
