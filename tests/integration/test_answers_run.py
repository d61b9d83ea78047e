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
    "Check each claim below": {"verdicts": [{"check": 1, "supported": True, "quote": "the"}]},
    "You grade an answer": {"correctness": 1, "covered": [1], "rationale": "ok"},
    "Write the one question": {"question": "hub will not get online"},
}


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeLLM:
    backend = FakeLLM(responses=REPLIES)
    monkeypatch.setattr("fixgraph.llm.base.build_llm", lambda cfg: LLMClient(backend, cache={"enabled": False}))
    return backend


def write_graded_set(folder: Path, grades: dict[tuple[str, str], tuple[str, float]]) -> list[str]:
    """A tiny graded set over the fixture questions: (system, qid) -> (answer text, person's grade)."""
    from fixgraph.answer.labelling import item_id

    answers, labels = folder / "graded_answers.jsonl", folder / "graded_labels.jsonl"
    records = [{"qid": q, "system": s, "answer": text, "abstained": False} for (s, q), (text, _) in grades.items()]
    answers.write_text("".join(json.dumps(r) + "\n" for r in records))
    labels.write_text(
        "".join(json.dumps({"item": item_id(s, q), "correctness": g}) + "\n" for (s, q), (_, g) in grades.items())
    )
    from tests.conftest import FIXTURES

    questions = FIXTURES / "questions.jsonl"
    return [
        f"answer.graded.answers={answers}",
        f"answer.graded.labels={labels}",
        f"answer.graded.questions={questions}",
    ]


# what people said about answers like the fake model's: moving the hub closer answers t-1, restarting does not
GRADED = {
    ("a", "t-1"): ("Move the hub closer to the router.", 1.0),
    ("b", "t-1"): ("Restart the hub.", 0.0),
    ("a", "t-3"): ("Close the app.", 1.0),
    ("b", "t-3"): ("Restart the hub.", 0.0),
}


def test_answers_experiment_end_to_end(
    fixture_config: Callable[..., DictConfig], fake: FakeLLM, tmp_path: Path
) -> None:
    import mlflow

    from fixgraph.answer.labelling import item_id

    labels = tmp_path / "labels.jsonl"  # a person graded three hybrid answers of this run
    labels.write_text(
        "".join(
            json.dumps({"item": item_id("qwen_coder_15b/hybrid", q), "qid": q, "correctness": g}) + "\n"
            for q, g in [("t-1", 1.0), ("t-2", 0.5), ("t-3", 1.0)]
        )
    )
    graded = write_graded_set(tmp_path, GRADED)
    overrides = ["answer.max_chunks=2", f"answer.labels={labels}", "answer.verify.quote_min_chars=3", *graded]
    cfg = fixture_config(["experiment=answers", "answer.systems=[hybrid]", *overrides])
    result = build_experiment(cfg.experiment).run(cfg)
    out = result.output_dir
    assert {p.name for p in out.iterdir()} >= {"answers.jsonl", "per_question.parquet", "table.md", "info.json"}
    answers = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
    assert sorted({a["system"] for a in answers}) == ["closed_book", "hybrid"] and len(answers) == 10
    assert {a["item"] for a in answers} >= {item_id("qwen_coder_15b/hybrid", "t-1")}  # the model is in the id
    hybrid = [a for a in answers if a["system"] == "hybrid"]
    assert all(a["stripped_citations"] == 1 for a in hybrid)  # source 9 of a two-chunk context
    assert all(len(a["context_ids"]) == 2 for a in hybrid)
    assert all(a["sentences"][1]["verdicts"] == {} and not a["sentences"][1]["supported"] for a in hybrid)
    assert not any(a["truncated"] for a in answers)

    per_question = pd.read_parquet(out / "per_question.parquet")
    closed = per_question[per_question["system"] == "closed_book"]
    assert (closed["unsupported_claim_rate"] == 1.0).all()  # nothing cited, nothing supported
    assert closed["citation_precision_support"].isna().all() and closed["faithfulness"].isna().all()
    rows = per_question[per_question["system"] == "hybrid"].set_index("qid")
    assert (rows["unsupported_claim_rate"] == 0.5).all()  # sentence 1 supported by chunk 1, sentence 2 uncited
    assert (rows["tokens_answer"] > 0).all() and (rows["answer_model_ms"] >= 0).all()
    # the default judge is the key-fact rules: "Move the hub closer. Restart it." states t-1's only fact
    assert rows["key_fact_coverage"].to_dict() == pytest.approx(
        {"t-1": 1.0, "t-2": 0.0, "t-3": 0.0, "t-4": 0.0, "t-5": float("nan")}, nan_ok=True
    )
    assert rows["correctness"].tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]  # t-5: answers the unanswerable
    assert closed.set_index("qid")["key_fact_coverage"].fillna(-1).tolist() == [0.0, 0.0, 0.0, 0.0, -1]
    # the person's grades of three hybrid answers sit next to the judge's: the judge-free comparison
    assert rows["human_correctness"].fillna(-1).tolist() == [1.0, 0.5, 1.0, -1, -1]
    assert closed["human_correctness"].isna().all()

    comparison = {(r["system"], r["metric"]): r for r in result.info["comparison"]}
    assert (
        comparison[("hybrid", "correctness")]["in_family"] and comparison[("hybrid", "key_fact_coverage")]["in_family"]
    )
    assert comparison[("hybrid", "correctness")]["diff"] == pytest.approx(0.2)
    assert comparison[("hybrid", "unsupported_claim_rate")]["diff"] == pytest.approx(-0.5)
    assert comparison[("hybrid", "unsupported_claim_rate")]["p_holm"] is None  # exploratory
    assert "Paired comparison vs closed_book" in result.table and "Abstention" in result.table
    # t-5 is unanswerable and nobody abstained: abstention recall 0, precision undefined
    assert result.info["abstention"]["hybrid"] == {"abstention_precision": None, "abstention_recall": 0.0}

    # the judge is the rules, measured on the graded set: they agree with the person on all 4 answers
    judge = result.info["judge"]
    assert judge["deterministic"] and judge["model"] is None and judge["identity"].startswith("keyfacts:lexical")
    assert judge["graded_set"]["matched"] == 4 and judge["graded_set"]["kappa"] == pytest.approx(1.0)
    # but its grades barely vary on this run (9 of 10 are 0): flagged, in the table and in MLflow
    assert judge["guard"]["flags"] == ["flat: 9 of 10 answers graded 0"]
    assert result.table.startswith("JUDGE UNINFORMATIVE: flat: 9 of 10 answers graded 0")
    # agreement with the labels of this run's own answers: 2 of 3 (the judge says 0 for t-2 and t-3)
    assert result.info["agreement"]["exact"] == pytest.approx(1 / 3)
    assert (out / "agreement.json").exists()

    mlflow.set_tracking_uri(str(cfg.tracking.uri))
    parent = mlflow.get_run(result.mlflow_run_id)
    assert parent.data.tags["stage"] == "answers"
    assert parent.data.tags["verifier_llm"] == "fake:fake-model"  # the answering model verified
    assert parent.data.tags["judge_model"] == "deterministic" and parent.data.tags["judge_informative"] == "false"
    assert parent.data.metrics["judge_kappa"] == pytest.approx(1.0) and parent.data.metrics["judge_informative"] == 0
    assert parent.data.metrics["labels_exact"] == pytest.approx(1 / 3)  # the run's own labels, apart
    assert result.info["verifier"] == {"identity": "fake:fake-model", "own_model": False, "batch": True}
    assert "vs_closed_book.hybrid.correctness.p_holm" in parent.data.metrics
    assert parent.data.metrics["llm_answer_calls"] == 10.0
    assert parent.data.metrics["llm_verify_calls"] == 5.0  # one batched call per hybrid answer
    children = mlflow.search_runs(
        experiment_ids=[parent.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent.info.run_id}'",
        output_format="list",
    )
    assert sorted(c.info.run_name for c in children) == ["closed_book", "hybrid"]
    for child in children:
        assert {"correctness", "correctness_ci_low", "key_fact_coverage", "answer_model_p95_ms"} <= set(
            child.data.metrics
        )


def judging_models(monkeypatch: pytest.MonkeyPatch, judge_replies: dict[str, Any]) -> tuple[FakeLLM, FakeLLM]:
    """The answering model and a judge model of its own (judge=llm's default option, qwen_coder_05b)."""
    answering, judging = FakeLLM(responses=REPLIES), FakeLLM(responses=judge_replies, model="judge")
    monkeypatch.setattr(
        "fixgraph.llm.base.build_llm",
        lambda cfg: LLMClient(judging if cfg["name"] == "qwen_coder_05b" else answering, cache={"enabled": False}),
    )
    return answering, judging


def test_a_constant_judge_trips_the_guard(
    fixture_config: Callable[..., DictConfig], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from fixgraph.answer.commands import closing_lines
    from fixgraph.answer.run import run_answers

    # issue 18's judge: 0.5 for everything and every key fact covered, closed book included
    answering, _ = judging_models(monkeypatch, {"You grade an answer": {"correctness": 0.5, "covered": [1]}})
    overrides = ["judge=llm", "answer.systems=[hybrid]", *write_graded_set(tmp_path, GRADED)]
    cfg = fixture_config(["experiment=answers", *overrides])
    result = run_answers(cfg, track=True)
    assert result.info["judge"]["guard"]["flags"] == [
        "flat: 10 of 10 answers graded 0.5",
        "closed book: key-fact recall 1.000 vs retrieved 1.000",
        "kappa: 0.000 on the graded set, below 0.4",  # never agrees with the person's 0 / 1
    ]
    assert result.info["judge"]["model"] == "fake:judge" and not result.info["judge"]["answering_model"]
    assert not any("You grade an answer" in r["prompt"] for r in answering.requests)  # never self-judged
    assert result.table.startswith("JUDGE UNINFORMATIVE: flat: 10 of 10")
    assert closing_lines(result)[-1].startswith("WARNING: judge llm is uninformative: flat: 10 of 10")
    import mlflow  # the run records which model judged and that it was flagged

    mlflow.set_tracking_uri(str(cfg.tracking.uri))
    tags = mlflow.get_run(result.mlflow_run_id).data.tags
    assert tags["judge_model"] == "fake:judge" and tags["judge_informative"] == "false"
    assert tags["judge_flags"].startswith("flat: 10 of 10 answers graded 0.5; closed book")


def test_a_judge_that_agrees_with_people_passes_the_guard(
    fixture_config: Callable[..., DictConfig], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from fixgraph.answer.commands import closing_lines
    from fixgraph.answer.run import run_answers

    # grades what it reads: moving the hub closer (the grounded answer) is right, restarting is not
    judging_models(
        monkeypatch,
        {
            "Answer to grade: Move the hub closer": {"correctness": 1, "covered": [1]},
            "Answer to grade: Close the app": {"correctness": 1, "covered": [1]},
            "Answer to grade: Restart the hub": {"correctness": 0, "covered": []},
        },
    )
    overrides = ["judge=llm", "answer.systems=[hybrid]", *write_graded_set(tmp_path, GRADED)]
    result = run_answers(fixture_config(["experiment=answers", *overrides]), track=False)
    verdict = result.info["judge"]["guard"]
    assert verdict["informative"] and verdict["flags"] == []
    assert verdict["checks"]["mode_share"] == 0.5 and verdict["checks"]["kappa"] == pytest.approx(1.0)
    assert "JUDGE UNINFORMATIVE" not in result.table and "Guard: informative." in result.table
    assert not any(line.startswith("WARNING") for line in closing_lines(result))


def test_the_answering_model_may_not_judge_itself(fixture_config: Callable[..., DictConfig], fake: FakeLLM) -> None:
    from fixgraph.answer.run import run_answers
    from fixgraph.config import ConfigError

    cfg = fixture_config(["experiment=answers", "judge=llm", "llm@judge.llm=qwen_coder_15b", "tracking.enabled=false"])
    with pytest.raises(ConfigError, match=r"judge.llm is the answering model"):
        run_answers(cfg)


def test_verifier_with_its_own_model_is_used_and_recorded(
    fixture_config: Callable[..., DictConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    import mlflow

    answering, checking = FakeLLM(responses=REPLIES), FakeLLM(responses=REPLIES, model="checker")
    monkeypatch.setattr(
        "fixgraph.llm.base.build_llm",
        lambda cfg: LLMClient(checking if cfg.get("model") == "checker" else answering, cache={"enabled": False}),
    )
    overrides = ["+llm@answer.verify.llm=fake", "+answer.verify.llm.model=checker", "answer.verify.quote_min_chars=3"]
    cfg = fixture_config(["experiment=answers", "answer.max_chunks=2", "answer.systems=[hybrid]", *overrides])
    result = build_experiment(cfg.experiment).run(cfg)
    verify = "Check each claim below"
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


def test_two_answering_models_are_compared_pair_by_pair(
    fixture_config: Callable[..., DictConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    from fixgraph.answer.compare import compare_runs
    from fixgraph.answer.run import run_answers
    from fixgraph.evaluation.protocol_errors import ComparisonError

    # the "base" model restarts the hub, the "tuned" one moves it closer (t-1's key fact)
    base = FakeLLM(responses={**REPLIES, "using ONLY": {"abstain": False, "sentences": [
        {"text": "Restart the hub.", "citations": [1]}]}})  # fmt: skip
    tuned = FakeLLM(responses={**REPLIES, "using ONLY": {"abstain": False, "sentences": [
        {"text": "Move the hub closer.", "citations": [1]}]}}, model="tuned")  # fmt: skip
    monkeypatch.setattr(
        "fixgraph.llm.base.build_llm",
        lambda cfg: LLMClient(tuned if cfg["name"] == "qwen_coder_05b" else base, cache={"enabled": False}),
    )
    common = ["experiment=answers", "answer.systems=[hybrid]", "answer.closed_book=false", "answer.baseline=hybrid",
              "answer.verify.enabled=false", "answer.max_questions=4", "tracking.enabled=false"]  # fmt: skip
    first = run_answers(fixture_config(common), name="base")
    second = run_answers(fixture_config([*common, "llm=qwen_coder_05b"]), name="tuned")
    assert first.info["qids"] == second.info["qids"] and len(first.info["qids"]) == 4  # the same sample
    text, rows = compare_runs(fixture_config(common), [first.output_dir, second.output_dir])
    coverage = next(r for r in rows if r["metric"] == "key_fact_coverage")
    # t-1's fact is covered by the tuned model only: +1 on one of the sampled answerable questions (t-5 is not)
    answerable = [q for q in first.info["qids"] if q != "t-5"]
    assert "t-1" in answerable and coverage["n_paired"] == len(answerable) and coverage["in_family"]
    assert coverage["system"] == "qwen_coder_05b/hybrid" and coverage["diff"] == pytest.approx(1 / len(answerable))
    assert "Paired comparison vs qwen_coder_15b/hybrid" in text
    third = run_answers(fixture_config([*common, "answer.max_questions=3"]), name="small")
    with pytest.raises(ComparisonError, match="different questions"):
        compare_runs(fixture_config(common), [first.output_dir, third.output_dir])
