"""What `fixgraph serve` serves (an MLflow run, a study finalist), the CLI's refusals, diagnosis on
man pages, and scoring diagnosis on a question file of logs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from omegaconf import DictConfig

from fixgraph.cli import main
from fixgraph.config import ConfigError, to_dict
from fixgraph.evaluation.protocol_errors import ProtocolError
from fixgraph.serve.app import create_app
from fixgraph.serve.service import Service
from fixgraph.serve.settings import build_settings
from fixgraph.serve.source import from_run, from_study
from tests.conftest import FIXTURES
from tests.serve_helpers import running


def test_serving_a_study_finalist_shows_its_recorded_dev_figures(protocol_config: Callable[..., DictConfig]) -> None:
    from fixgraph.experiment.locked import record_finalists
    from fixgraph.experiment.studies import finalist_config

    cfg = protocol_config(["tracking.enabled=false"])
    record_finalists(cfg, "s1", ["dense"], track=False)
    live = protocol_config(["tracking.enabled=false", "serve.port=9123", "llm.default=ok", "retriever=bm25"])
    served = from_study(live, "s1", "dense")
    # the recorded systems exactly as `fixgraph answers --study` uses them; the rest is the live config
    answering = finalist_config(live, "s1", "dense")
    assert served.system == "dense" and list(served.cfg.systems) == ["bm25", "dense"]
    assert to_dict(served.cfg.systems.dense) == to_dict(answering.systems.dense)
    assert served.cfg.serve.port == 9123 and served.cfg.llm.default == "ok" and served.cfg.reranker.kind == "none"
    record = (Path(str(cfg.paths.experiments)) / "s1" / "finalists.yaml").read_text()
    dev = served.origin["figures"]["dev"]
    assert served.origin["role"] == "finalist" and "test" not in served.origin["figures"]  # not scored yet
    assert {r["metric"] for r in dev} >= {"recall_at_8", "mrr"} and f"{dev[0]['mean']}"[:5] in record
    look = Path(str(cfg.paths.experiments)) / "s1" / "test_looks" / "1"  # as `fixgraph test` writes it
    look.mkdir(parents=True)
    rows = [{"system": "dense", "metric": "recall_at_8", "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}]
    (look / "test_report.json").write_text(json.dumps({"rows": rows, "mlflow_run_id": "r1"}))
    after_test = from_study(live, "s1", "dense")
    tested = after_test.origin["figures"]
    assert tested["test"][0]["mean"] == 0.5 and tested["test_look"] == 1 and tested["test_run"] == "r1"
    baseline = from_study(live, "s1", "bm25")
    assert baseline.origin["role"] == "baseline" and baseline.system == "bm25"
    with pytest.raises(ProtocolError, match="no system 'hybrid'"):
        from_study(live, "s1", "hybrid")
    with running(create_app(Service(after_test, build_settings(served.cfg.serve)))) as url:
        shown = httpx.get(f"{url}/config").json()
        assert shown["origin"]["study"] == "s1" and shown["system"] == "dense"
        assert shown["origin"]["figures"]["dev"] == dev and shown["systems"] == ["bm25", "dense"]
    assert shown["origin"]["figures"]["test"] == tested["test"]


def test_serving_an_mlflow_run_takes_its_recorded_system(fixture_config: Callable[..., DictConfig]) -> None:
    from fixgraph.experiment.runners import build_experiment

    cfg = fixture_config(["experiment=single", "retriever=bm25", "comparison.plots=false", "systems={}"])
    result = build_experiment(cfg.experiment).run(cfg, None, "served-run", track=True)
    live = fixture_config(["llm.default=live"])  # live: three systems, hybrid selected
    served = from_run(live, result.mlflow_run_id)
    assert served.system == "bm25" and list(served.cfg.systems) == ["bm25"]
    assert to_dict(served.cfg.systems.bm25) == to_dict(cfg.retriever)
    assert served.origin["kind"] == "run" and served.origin["config_from"] == result.mlflow_run_id
    assert served.cfg.llm.default == "live"
    import mlflow

    client = mlflow.MlflowClient()
    child = client.search_runs(
        [client.get_run(result.mlflow_run_id).info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{result.mlflow_run_id}'",
    )[0]
    from_child = from_run(live, child.info.run_id)
    assert from_child.system == "bm25" and from_child.origin["config_from"] == result.mlflow_run_id
    recall = from_child.origin["figures"]["dev"]["recall_at_8"]
    assert recall["mean"] == pytest.approx(result.metrics["bm25"]["recall_at_8"]["mean"])
    with pytest.raises(ConfigError, match="no MLflow run 'nope'"):
        from_run(live, "nope")


def test_the_mlflow_record_holds_no_api_key(fixture_config: Callable[..., DictConfig], tmp_path: Path) -> None:
    from fixgraph.experiment.runners import build_experiment

    cfg = fixture_config(["experiment=single", "retriever=bm25", "comparison.plots=false", "+llm.api_key=sk-secret"])
    result = build_experiment(cfg.experiment).run(cfg, None, "no-keys", track=True)
    import mlflow

    client = mlflow.MlflowClient()
    run = client.get_run(result.mlflow_run_id)
    assert run.data.params["llm.api_key"] == "<redacted>"
    local = client.download_artifacts(result.mlflow_run_id, "config.yaml", str(tmp_path))
    text = Path(local).read_text()
    assert "sk-secret" not in text and "<redacted>" in text


def test_cli_refuses_a_public_binding_without_flag_and_key(
    fixture_config: Callable[..., DictConfig], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FIXGRAPH_API_KEY", raising=False)
    assert main(["serve", "serve.host=0.0.0.0"]) == 2
    assert "--allow-remote" in capsys.readouterr().err
    assert main(["serve", "--allow-remote", "serve.host=0.0.0.0"]) == 2
    assert "needs an API key" in capsys.readouterr().err
    assert main(["serve", "--study", "s"]) == 2
    assert "--study and --finalist go together" in capsys.readouterr().err


@pytest.fixture
def man_config(tmp_path: Path) -> Callable[..., DictConfig]:
    import shutil

    from fixgraph.config import compose
    from fixgraph.corpus.mandoc import ensure_mandoc

    ensure_mandoc()  # CI installs it with apt; elsewhere it is unpacked from Debian's .deb once
    shutil.copytree(FIXTURES / "man", tmp_path / "man")

    def make(overrides: list[str]) -> DictConfig:
        return compose(
            [
                "corpus=linux_man",
                f"corpus.snapshot_dir={tmp_path / 'man'}",
                "embedder=hashing",
                "experiment=single",
                "retriever=bm25",
                "tracking.enabled=false",
                f"paths.artifacts={tmp_path / 'artifacts'}",
                *overrides,
            ]
        )

    return make


def test_diagnose_reaches_the_errno_entry_of_the_failing_call(man_config: Callable[..., DictConfig]) -> None:
    from fixgraph.serve.source import composed

    cfg = man_config([])
    service = Service(composed(cfg), build_settings(cfg.serve))
    with running(create_app(service)) as url:
        result = httpx.post(f"{url}/diagnose", json={"log": "frob: Bad file descriptor (EBADF)"}).json()
    assert {("errno", "EBADF"), ("command", "frob")} <= {(s["kind"], s["value"]) for s in result["signatures"]}
    top = result["causes"][0]
    assert top["doc_id"] == "frob.2" and top["section"] == "ERRORS"
    assert {m["how"] for m in top["matched"]} >= {"page_of", "errno_entry"}
    entry = top["cause"][0]
    assert entry["label"] == "EBADF (errors)" and entry["text"].startswith("EBADF")
    assert "is not a valid open file descriptor" in entry["text"]
    link = next(x for x in result["links"] if x["value"] == "EBADF")
    assert {d["doc_id"] for d in link["documents"]} >= {"frob.2"}


def test_log_question_file_is_scored_like_any_question_file(
    man_config: Callable[..., DictConfig], tmp_path: Path
) -> None:
    from fixgraph.serve.logeval import evaluate_logs

    questions = tmp_path / "logs.jsonl"
    rows = [
        ("l-1", "frob(3, 0x10) = -1 EINVAL (Invalid argument)", "frob.2", "contains both"),
        ("l-2", "frob: Bad file descriptor (EBADF)", "frob.2", "is not a valid open file descriptor"),
    ]
    questions.write_text(
        "".join(
            json.dumps({"qid": q, "question": log, "qtype": "log", "gold": [{"page": page, "quote": quote}]}) + "\n"
            for q, log, page, quote in rows
        )
    )
    cfg = man_config(["evaluation.bootstrap.resamples=200", "comparison.permutations=999"])
    result = evaluate_logs(cfg, questions)
    assert result["system"] == "bm25" and result["scored_questions"] == 2
    out = Path(result["output"])
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["diagnose"]["answer_page_hit_at_1"]["mean"] == 1.0  # both reach frob(2) first
    comparison = json.loads((out / "comparison.json").read_text())
    family = comparison["family"]
    assert family["baseline"] == "bm25" and family["hypotheses"] == [["diagnose", "answer_page_hit_at_8"]]
    assert "| diagnose" in result["table"]
