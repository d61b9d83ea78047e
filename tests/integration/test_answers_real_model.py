"""Answers, verifier and judge with the real 0.5B GGUF on llama.cpp (slow): two questions of the fixture
corpus, closed book vs hybrid. Skipped, saying why, without llama-cpp-python or the assembled model."""

from __future__ import annotations

import json
from collections.abc import Callable

from omegaconf import DictConfig

from tests.conftest import REPO
from tests.integration.conftest import REAL_MODEL

pytestmark = REAL_MODEL


def test_real_model_answers_verifies_and_judges(fixture_config: Callable[..., DictConfig]) -> None:
    from fixgraph.answer.run import run_answers

    cfg = fixture_config(
        [
            "experiment=answers",
            "llm=qwen_coder_05b",
            f"llm.model_dir={REPO / 'models'}",
            "answer.max_questions=2",
            "answer.systems=[hybrid]",
            "answer.max_chunks=2",
            "answer.max_tokens=80",
            "answer.ragas.enabled=false",
        ]
    )
    result = run_answers(cfg)
    answers = [json.loads(line) for line in (result.output_dir / "answers.jsonl").read_text().splitlines()]
    assert sorted({a["system"] for a in answers}) == ["closed_book", "hybrid"] and len(answers) == 4
    answered = [a for a in answers if not a["abstained"]]
    # a real model produced parseable answers and grades on the rubric (or None when malformed)
    assert answered and all(a["reply_format"] in ("json", "truncated_json", "text") for a in answered)
    assert all(a["judge"]["correctness"] in (None, 0.0, 0.5, 1.0) for a in answers)
    hybrid = [a for a in answered if a["system"] == "hybrid"]
    assert all(set(s["verdicts"]) == set(s["citations"]) for a in hybrid for s in a["sentences"])
    usage = result.info["llm"]["usage"]
    assert usage["answer"]["calls"] >= 4 and usage["answer"]["output_tokens"] > 0
    assert result.mlflow_run_id is not None


def test_real_model_generates_a_checked_bridge_question(fixture_config: Callable[..., DictConfig]) -> None:
    import pandas as pd

    from fixgraph.answer.qcandidates import bridge_candidates
    from fixgraph.answer.questiongen import generate
    from fixgraph.llm.base import build_llm
    from fixgraph.pipeline import stages
    from fixgraph.pipeline.layout import Layout

    cfg = fixture_config(["llm=qwen_coder_05b", f"llm.model_dir={REPO / 'models'}"])
    stages.chunk(cfg)
    docs = stages.load_documents(cfg)
    texts, titles = {d.id: d.text for d in docs}, {d.id: d.title for d in docs}
    candidates = list(bridge_candidates(pd.read_parquet(Layout.from_config(cfg).link_graph), texts, titles, 1))
    result = generate(build_llm(cfg.llm), candidates, texts, max_tokens=200)
    summary = result.summary()
    # constrained decoding: every reply is schema-valid JSON with evidence numbers that were shown
    assert summary["checks"]["valid_output"]["failed"] == 0 and summary["checks"]["evidence_numbers"]["failed"] == 0
    assert summary["checks"]["quote_verbatim"]["failed"] == 0  # quotes are copied by code
    assert summary["kinds"]["bridge"]["candidates"] == 1 and len(result.accepted) + len(result.rejected) == 1
