"""Question generation with the fake LLM on the fixture corpus: candidates from conditional links, the
mechanical checks and screen (each rejection path), review, and the generated file run by `evaluate`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig

from fixgraph.answer.qchecks import content_words, mechanical_problems
from fixgraph.answer.questiongen import (
    Candidate,
    bridge_candidates,
    check_file,
    evidence_page,
    generate,
    review,
    write_questions,
)
from fixgraph.evaluation.questions import Question
from fixgraph.experiment import stages
from fixgraph.experiment.evaluate import evaluate
from fixgraph.experiment.layout import Layout
from fixgraph.llm.base import FakeLLM
from fixgraph.llm.client import LLMClient

QUOTE = "Hold the Reset button for fifteen seconds with a paper clip."


def generated(question: str, quote: str = QUOTE, facts: tuple[str, ...] = ("hold the button fifteen seconds",)) -> str:
    return json.dumps(
        {
            "question": question,
            "answer": "Hold the button on the back for fifteen seconds with a paper clip.",
            "key_facts": list(facts),
            "evidence": [{"page": "reset-hub", "quote": quote}],
        }
    )


def test_content_words_drop_stopwords_and_plurals() -> None:
    assert content_words("Reset the hubs to factory settings") == {"reset", "hub", "factory", "setting"}


def test_bridge_generation_checks_screen_and_evaluate(
    fixture_config: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = fixture_config(["tracking.enabled=false"])
    stages.chunk(cfg)
    docs = stages.load_documents(cfg)
    texts, titles = {d.id: d.text for d in docs}, {d.id: d.title for d in docs}
    links = pd.read_parquet(Layout.from_config(cfg).link_graph)
    candidates = list(bridge_candidates(links, texts, titles, limit=5))
    assert [(c.bridge or {}).get("from") for c in candidates] == ["wifi-trouble"]
    bridge = candidates[0]
    assert bridge.bridge == {"from": "wifi-trouble", "to": "reset-hub", "link_text": "reset the hub"}
    assert "Reset the hub" in bridge.prompt and "If the light stays amber" in bridge.prompt

    llm = LLMClient(
        FakeLLM(
            script=[
                generated("The light on my widget box stays amber all the time, what can I do about it?"),
                generated("The light on my widget box stays amber all the time, what can I do about that?"),  # dup
                generated("How do I reset my hub when the light is amber?"),  # leaks "reset", "hub"
                generated("My box light is amber and stuck, help?", quote="Hold the button for ten seconds."),
                "not json",
                "still not json",
            ]
        ),
        cache={"enabled": False},
    )
    result = generate(llm, [bridge] * 5, texts, titles)
    assert len(result.accepted) == 1
    problems = [r["problems"] for r in result.rejected]
    assert "near-duplicate" in problems[0][0]
    assert problems[1] == ["question leaks title words of 'reset-hub': hub, reset"]
    assert problems[2][0].startswith("gold quote not verbatim in 'reset-hub'")
    assert problems[3][0].startswith("invalid output")
    question = result.accepted[0]
    assert question.qtype == "bridge" and question.bridge is not None and question.bridge.to == "reset-hub"

    out = tmp_path / "generated.jsonl"
    write_questions(out, result.accepted)
    assert check_file(out, texts, titles) == {}
    evaluation = evaluate(cfg, questions_path=out)  # runnable as `fixgraph evaluate --questions`
    assert evaluation.coverage == 1.0 and evaluation.info["questions"] == 1

    replies = iter(["x", "a"])  # 'x' is not an answer: asked again
    made, reviewed = review(out, ask=lambda _: next(replies))
    assert made == 1 and [json.loads(line)["qid"] for line in reviewed.read_text().splitlines()] == [question.qid]
    assert review(out, ask=lambda _: "q")[0] == 0  # resumed: nothing left to review


def test_path_candidate_gold_page_comes_from_the_evidence() -> None:
    candidate = Candidate("path", "a -> b -> c", "prompt", ("reset-hub", "wifi-trouble"), ("reset-hub",))
    llm = LLMClient(FakeLLM(script=[generated("My box keeps blinking, what now?")]), cache={"enabled": False})
    texts = {"reset-hub": f"Intro. {QUOTE} More.", "wifi-trouble": "Other."}
    result = generate(llm, [candidate], texts, {"reset-hub": "Reset the hub"})
    assert len(result.accepted) == 1 and result.accepted[0].qtype == "multi"
    assert result.accepted[0].gold[0].page == "reset-hub"


def test_evidence_page_is_resolved_by_code() -> None:
    candidate = Candidate("path", "a -> b", "prompt", ("wifi-trouble", "reset-hub"), ("reset-hub",))
    texts = {"reset-hub": f"Intro. {QUOTE}", "wifi-trouble": "Other."}
    assert evidence_page(candidate, "page 2", QUOTE, texts) == "reset-hub"  # the quote decides
    assert evidence_page(candidate, "page battery", "not anywhere", texts) == "battery"


def test_mechanical_problems_name_missing_pages() -> None:
    question = Question(qid="x", question="What now?", gold=[{"page": "nope", "quote": QUOTE}])
    assert mechanical_problems(question, {}, {}, []) == ["gold page 'nope' does not exist"]
