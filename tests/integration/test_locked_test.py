"""The locked-test protocol end to end on the fixture corpus: order, refusal, forced re-run, tampering."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from omegaconf import DictConfig

from fixgraph.evaluation.protocol_errors import LockedSplitError, ProtocolError, SplitError
from fixgraph.experiment.evaluate import evaluate
from fixgraph.experiment.locked import StudyPaths, attempts, read_finalists, record_finalists, run_test


def test_test_split_cannot_be_scored_before_finalists(protocol_config: Callable[..., DictConfig]) -> None:
    cfg = protocol_config(["tracking.enabled=false"])
    with pytest.raises(ProtocolError, match="record the finalists on dev first"):
        run_test(cfg, "early")
    with pytest.raises(LockedSplitError, match="the test part is locked"):
        evaluate(protocol_config(["split=test", "tracking.enabled=false"]))
    with pytest.raises(ProtocolError, match="not split=test"):
        record_finalists(protocol_config(["split=test", "tracking.enabled=false"]), "s", ["dense"])
    with pytest.raises(ProtocolError, match="baseline 'bm25' cannot be one of the finalists"):
        record_finalists(cfg, "s", ["bm25", "dense"])


def test_locked_test_runs_once_then_needs_a_recorded_reason(protocol_config: Callable[..., DictConfig]) -> None:
    import mlflow

    cfg = protocol_config(["comparison.plots=true"])
    path, dev = record_finalists(cfg, "study1", ["dense", "hybrid"], track=False)
    record = read_finalists(StudyPaths.of(cfg, "study1"))
    assert record["baseline"] == "bm25" and record["finalists"] == ["dense", "hybrid"]
    assert record["family"]["hypotheses"] == [["dense", "recall_at_8"], ["hybrid", "recall_at_8"]]
    assert sorted(record["config"]["systems"]) == ["bm25", "dense", "hybrid"]
    assert dev.info["questions"] == 11  # the dev part only
    assert {r["system"] for r in record["dev_evidence"]["comparison"]} == {"bm25", "dense", "hybrid"}

    report_md, result = run_test(cfg, "study1")
    assert result.info["questions"] == 5  # the test part only
    assert report_md == path.parent / "test_looks" / "1" / "test_report.md"
    report = json.loads((report_md.parent / "test_report.json").read_text())
    assert report["look"] == 1
    finalist_rows = [r for r in report["rows"] if r["system"] != "bm25"]
    assert {(r["system"], r["metric"]) for r in finalist_rows if r["in_family"]} == {
        ("dense", "recall_at_8"),
        ("hybrid", "recall_at_8"),
    }
    for row in finalist_rows:
        for key in ("diff", "diff_ci_low", "diff_ci_high", "p"):
            assert row[key] is not None
        assert 0 < row["p"] <= 1
        assert (row["p_holm"] is not None) == row["in_family"]
    assert "p_Holm" in report_md.read_text()

    mlflow.set_tracking_uri(str(cfg.tracking.uri))
    run = mlflow.get_run(result.mlflow_run_id)
    assert run.data.tags["stage"] == "locked_test" and run.data.tags["study"] == "study1"
    assert run.data.tags["locked_test_look"] == "1"
    assert "vs_bm25.dense.recall_at_8.p_holm" in run.data.metrics
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(result.mlflow_run_id, "study")}
    assert {"study/finalists.yaml", "study/test_report.json", "study/test_report.md"} <= artifacts
    plots = {a.path for a in mlflow.MlflowClient().list_artifacts(result.mlflow_run_id, "test_report/plots")}
    assert plots == {
        "test_report/plots/metrics_ci.png",
        "test_report/plots/recall_at_k.png",
        "test_report/plots/recall_at_8_by_qtype.png",
    }
    assert (report_md.parent / "plots" / "metrics_ci.png").read_bytes()[:4] == b"\x89PNG"

    with pytest.raises(ProtocolError, match=r"already scored on test.*--force-reason"):
        run_test(cfg, "study1", track=False)
    with pytest.raises(ProtocolError, match="already scored on test"):
        run_test(cfg, "study1", force_reason="   ", track=False)
    with pytest.raises(ProtocolError, match="finalists can no longer change"):
        record_finalists(cfg, "study1", ["dense"], replace=True, track=False)

    first_report = report_md.read_text()
    second_md, _ = run_test(protocol_config(), "study1", force_reason="bootstrap seed bug fixed in abc123", track=False)
    log = attempts(StudyPaths.of(cfg, "study1"))
    # every attempt is kept and numbered: the completed look, two refusals, the forced look
    assert [(a["attempt"], a["outcome"], a.get("look")) for a in log] == [
        (1, "completed", 1),
        (2, "refused", None),
        (3, "refused", None),
        (4, "completed", 2),
    ]
    assert "--force-reason" in log[1]["reason"]
    assert [a["forced"] for a in log if a["outcome"] == "completed"] == [False, True]
    assert log[3]["force_reason"] == "bootstrap seed bug fixed in abc123" and log[3]["tracked"] is False
    # the forced look has its own report; the first one is untouched
    assert second_md == path.parent / "test_looks" / "2" / "test_report.md"
    assert "Forced re-run" in second_md.read_text() and report_md.read_text() == first_report


def test_tampering_is_detected(protocol_config: Callable[..., DictConfig], tmp_path: Path) -> None:
    cfg = protocol_config(["tracking.enabled=false"])
    path, _ = record_finalists(cfg, "study2", ["dense"], family_metrics=["precision_at_5"])
    record = read_finalists(StudyPaths.of(cfg, "study2"))
    assert record["family"]["hypotheses"] == [["dense", "precision_at_5"]]
    assert record["metrics"][0] == "precision_at_5" and "recall_at_8" in record["metrics"]
    # 1. finalists.yaml edited after recording (here: the family quietly narrowed)
    original = path.read_text()
    record = yaml.safe_load(original)
    record["finalists"] = ["hybrid"]
    path.write_text(yaml.safe_dump(record, sort_keys=False))
    with pytest.raises(ProtocolError, match="edited after it was recorded"):
        run_test(cfg, "study2")
    path.write_text(original)
    # 2. a test question edited in the pool (same id, different reference answer)
    pool = Path(str(cfg.splitting.pool))
    split = json.loads(Path(str(cfg.splitting.file)).read_text())
    victim = next(qid for qid, entry in split["questions"].items() if entry["part"] == "test")
    lines = [json.loads(line) for line in pool.read_text().splitlines()]
    for line in lines:
        if line["qid"] == victim:
            line["answer"] = "a different reference answer"
    pool.write_text("".join(json.dumps(line) + "\n" for line in lines))
    with pytest.raises(SplitError, match=rf"test question '{victim}' was edited"):
        run_test(cfg, "study2")
    log = attempts(StudyPaths.of(cfg, "study2"))
    assert [a["outcome"] for a in log] == ["refused", "refused"]  # no `started` line, nothing completed
    assert "edited after it was recorded" in log[0]["reason"] and victim in log[1]["reason"]


def test_cli_names_the_missing_step_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import CONF

    done = subprocess.run(
        [sys.executable, "-m", "fixgraph.cli", "test", "--study", "nope"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"FIXGRAPH_CONFIG_DIR": str(CONF), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("fixgraph test: error: experiments/nope/finalists.yaml not found")
    assert "Traceback" not in done.stderr


def test_exploratory_systems_are_scored_in_each_look_but_stay_out_of_the_family(
    protocol_config: Callable[..., DictConfig],
) -> None:
    from fixgraph.serve.source import from_study

    cfg = protocol_config(["tracking.enabled=false"])
    with pytest.raises(ProtocolError, match="dense: a system is the baseline, a finalist or exploratory"):
        record_finalists(cfg, "study3", ["dense"], exploratory=["dense"])
    record_finalists(cfg, "study3", ["dense"], exploratory=["hybrid"], track=False)
    record = read_finalists(StudyPaths.of(cfg, "study3"))
    assert record["finalists"] == ["dense"] and record["exploratory"] == ["hybrid"]
    assert record["family"]["hypotheses"] == [["dense", "recall_at_8"]]  # Holm over one hypothesis, not two
    assert sorted(record["config"]["systems"]) == ["bm25", "dense", "hybrid"]
    report_md, _ = run_test(cfg, "study3", track=False)
    rows = json.loads((report_md.parent / "test_report.json").read_text())["rows"]
    hybrid = [r for r in rows if r["system"] == "hybrid"]
    assert hybrid and all(not r["in_family"] and r["p_holm"] is None and r["p"] is not None for r in hybrid)
    (dense,) = [r for r in rows if r["system"] == "dense" and r["metric"] == "recall_at_8"]
    assert dense["in_family"] and dense["p_holm"] == dense["p"]  # a family of one: Holm leaves p as it is
    table = report_md.read_text()
    assert "| hybrid (exploratory) " in table and "| dense " in table and "dense (exploratory)" not in table
    assert from_study(cfg, "study3", "hybrid").origin["role"] == "exploratory"
