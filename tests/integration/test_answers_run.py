"""The `answers` experiment end to end on the fixture corpus with the fake LLM: files, tables, paired
comparison against the closed-book baseline, MLflow parent and child runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from omegaconf import DictConfig

from fixgraph.experiment.runners import build_experiment
from fixgraph.llm.base import FakeLLM
from fixgraph.llm.client import LLMClient

REPLIES: dict[str, Any] = {
    "using ONLY the numbered sources": {
        "abstain": False,
        "sentences": [{"text": "Move the hub closer.", "citations": [1, 9]}, {"text": "Restart it.", "citations": []}],
    },
    "from memory": {"abstain": False, "sentences": [{"text": "Restart the hub.", "citations": []}]},
    "Does the text support the claim?": {"supported": True, "quote": "the"},
    "You grade an answer": {"correctness": 1, "covered": [1], "rationale": "ok"},
    "Write the one question": {"question": "hub will not get online"},
}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeLLM:
    backend = FakeLLM(responses=REPLIES)
    monkeypatch.setattr("fixgraph.llm.base.build_llm", lambda cfg: LLMClient(backend, cache={"enabled": False}))
    return backend


def test_answers_experiment_end_to_end(
    fixture_config: Callable[..., DictConfig], fake: FakeLLM, tmp_path: Path
) -> None:
    import mlflow

    from fixgraph.answer.labelling import item_id

    labels = tmp_path / "labels.jsonl"  # a person graded three hybrid answers; the fake judge says 1 to all
    labels.write_text(
        "".join(
            json.dumps({"item": item_id("hybrid", q), "qid": q, "correctness": g}) + "\n"
            for q, g in [("t-1", 1.0), ("t-2", 0.5), ("t-3", 1.0)]
        )
    )
    cfg = fixture_config(["experiment=answers", "answer.max_chunks=2", f"answer.labels={labels}"])
    result = build_experiment(cfg.experiment).run(cfg)
    out = result.output_dir
    assert {p.name for p in out.iterdir()} >= {"answers.jsonl", "per_question.parquet", "table.md", "info.json"}
    answers = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert sorted({a["system"] for a in answers}) == ["closed_book", "hybrid"] and len(answers) == 10
    hybrid = [a for a in answers if a["system"] == "hybrid"]
    assert all(a["stripped_citations"] == 1 for a in hybrid)  # source 9 of a two-chunk context
    assert all(len(a["context_ids"]) == 2 for a in hybrid)
    assert all(a["sentences"][1]["verdicts"] == {} and not a["sentences"][1]["supported"] for a in hybrid)

    per_question = pd.read_parquet(out / "per_question.parquet")
    closed = per_question[per_question["system"] == "closed_book"]
    assert (closed["unsupported_claim_rate"] == 1.0).all()  # nothing cited, nothing supported
    assert closed["citation_precision_support"].isna().all() and closed["faithfulness"].isna().all()
    rows = per_question[per_question["system"] == "hybrid"]
    assert (rows["unsupported_claim_rate"] == 0.5).all()  # sentence 1 supported by chunk 1, sentence 2 uncited
    assert (rows["correctness"] == 1.0).all() and (rows["tokens_answer"] > 0).all()

    comparison = {(r["system"], r["metric"]): r for r in result.info["comparison"]}
    assert comparison[("hybrid", "correctness")]["in_family"] and comparison[("hybrid", "correctness")]["diff"] == 0.0
    assert comparison[("hybrid", "unsupported_claim_rate")]["diff"] == pytest.approx(-0.5)
    assert comparison[("hybrid", "unsupported_claim_rate")]["p_holm"] is None  # exploratory
    assert "Paired comparison vs closed_book" in result.table and "Abstention" in result.table
    # t-5 is unanswerable and nobody abstained: abstention recall 0, precision undefined
    assert result.info["abstention"]["hybrid"] == {"abstention_precision": None, "abstention_recall": 0.0}

    # agreement 2 of 3; the judge uses one grade only, so chance agreement equals observed: kappa 0
    assert result.info["agreement"]["exact"] == pytest.approx(2 / 3) and result.info["agreement"]["kappa"] == 0.0
    assert (out / "agreement.json").exists()

    mlflow.set_tracking_uri(str(cfg.tracking.uri))
    parent = mlflow.get_run(result.mlflow_run_id)
    assert parent.data.tags["stage"] == "answers"
    assert parent.data.tags["verifier_llm"] == "fake:fake-model"  # the answering model verified
    assert result.info["verifier"] == {"identity": "fake:fake-model", "own_model": False}
    assert "vs_closed_book.hybrid.correctness.p_holm" in parent.data.metrics
    assert parent.data.metrics["llm_answer_calls"] == 10.0
    assert parent.data.metrics["judge_exact"] == pytest.approx(2 / 3)
    children = mlflow.search_runs(
        experiment_ids=[parent.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'",
        output_format="list",
    )
    assert sorted(c.info.run_name for c in children) == ["closed_book", "hybrid"]
    for child in children:
        assert {"correctness", "correctness_ci_low", "correctness_ci_high", "answer_p95_ms"} <= set(child.data.metrics)


def test_verifier_with_its_own_model_is_used_and_recorded(
    fixture_config: Callable[..., DictConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow

    answering, checking = FakeLLM(responses=REPLIES), FakeLLM(responses=REPLIES, model="checker")
    monkeypatch.setattr(
        "fixgraph.llm.base.build_llm",
        lambda cfg: LLMClient(checking if cfg.get("model") == "checker" else answering, cache={"enabled": False}),
    )
    overrides = ["+llm@answer.verify.llm=fake", "+answer.verify.llm.model=checker", "answer.ragas.enabled=false"]
    cfg = fixture_config(["experiment=answers", "answer.max_chunks=2", *overrides])
    result = build_experiment(cfg.experiment).run(cfg)
    verify = "Does the text support the claim?"
    assert not any(verify in r["prompt"] for r in answering.requests)
    # 5 hybrid answers, one cited sentence each (citation 9 is stripped, sentence 2 is uncited)
    assert [verify in r["prompt"] for r in checking.requests] == [True] * 5
    assert result.info["verifier"]["identity"] == "fake:checker" and result.info["verifier"]["own_model"]
    mlflow.set_tracking_uri(str(cfg.tracking.uri))
    parent = mlflow.get_run(result.mlflow_run_id)
    assert parent.data.tags["verifier_llm"] == "fake:checker" and parent.data.tags["llm"] == "fake:fake-model"
    assert parent.data.metrics["llm_verifier_verify_calls"] == 5.0


def test_closed_book_option_answers_without_retrieval(fixture_config: Callable[..., DictConfig], fake: FakeLLM) -> None:
    from fixgraph.answer.run import run_answers

    cfg = fixture_config(["answer=closed_book", "answer.ragas.enabled=false", "tracking.enabled=false"])
    result = run_answers(cfg)
    assert result.info["systems"] == ["closed_book"]
    assert all("Sources:" not in r["prompt"] for r in fake.requests if "from memory" in r["prompt"])


def test_unknown_answer_system_is_named(fixture_config: Callable[..., DictConfig], fake: FakeLLM) -> None:
    from fixgraph.answer.run import run_answers
    from fixgraph.config import ConfigError

    with pytest.raises(ConfigError, match=r"answer.systems: nope not configured"):
        run_answers(fixture_config(["answer.systems=[nope]", "tracking.enabled=false"]))
