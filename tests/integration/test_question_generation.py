"""Question generation with the fake LLM on the fixture corpus: candidates from conditional links, the
mechanical checks and screen (each rejection path), review, and the generated file run by `evaluate`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig

from fixgraph.answer.qcandidates import Candidate, EvidenceSentence, bridge_candidates
from fixgraph.answer.qchecks import content_words, mechanical_problems
from fixgraph.answer.questiongen import check_file, generate, review, write_questions
from fixgraph.evaluation.questions import Question
from fixgraph.experiment.evaluate import evaluate
from fixgraph.llm.base import FakeLLM
from fixgraph.llm.client import LLMClient
from fixgraph.pipeline import stages
from fixgraph.pipeline.layout import Layout

QUOTE = "Hold the Reset button for fifteen seconds with a paper clip."


def generated(
    question: str, evidence: tuple[int, ...] = (3,), facts: tuple[str, ...] = ("hold fifteen seconds",)
) -> str:
    return json.dumps(
        {
            "question": question,
            "answer": "Hold the button on the back for fifteen seconds with a paper clip.",
            "key_facts": list(facts),
            "evidence": list(evidence),
        }
    )


def test_content_words_drop_stopwords_and_match_stems() -> None:
    assert content_words("Reset the hubs") == {"reset", "hub"}
    assert content_words("Connecting to the hub") == content_words("connect hubs")


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
    assert bridge.leak == (("reset-hub", "Reset the hub"),)
    assert "If the light stays amber" in bridge.prompt  # page A's situation
    assert f"[3] {QUOTE}" in bridge.prompt and bridge.sentences[2] == EvidenceSentence("reset-hub", QUOTE)
    # the title line is not offered as evidence; a short heading is shown without a number
    assert "[page reset-hub]\n[1] Return the hub" in bridge.prompt and "\n    Factory reset\n" in bridge.prompt

    llm = LLMClient(
        FakeLLM(
            script=[
                generated("The light on my widget box stays amber all the time, what can I do about it?"),
                generated("The light on my widget box stays amber all the time, what can I do about that?"),  # dup
                generated("The light on my widget box stays amber all the time, what can I do about this?"),  # dup
                generated("How do I reset my hub when the light is amber?"),  # names "reset" + "hub"
                generated("How do I reset the hub?"),  # the retry names them again
                "not json",
                "still not json",  # the client's own retry
                "not json either",
                "no",  # the feedback retry, and its client retry
            ]
        ),
        cache={"enabled": False},
    )
    result = generate(llm, [bridge] * 4, texts)
    assert len(result.accepted) == 1
    problems = [r["problems"] for r in result.rejected]
    assert "near-duplicate" in problems[0][0]
    assert problems[1] == ["question names the concept of 'reset-hub' ('Reset the hub'): hub, reset"]
    assert problems[2][0].startswith("invalid output")
    assert [r["attempts"] for r in result.rejected] == [2, 2, 2]
    question = result.accepted[0]
    assert question.qtype == "bridge" and question.bridge is not None and question.bridge.to == "reset-hub"
    assert [(g.page, g.quote) for g in question.gold] == [("reset-hub", QUOTE)]

    out = tmp_path / "generated.jsonl"
    write_questions(out, result.accepted)
    assert check_file(out, texts, titles) == {}
    evaluation = evaluate(cfg, questions_path=out)  # runnable as `fixgraph evaluate --questions`
    assert evaluation.coverage == 1.0 and evaluation.info["questions"] == 1

    replies = iter(["x", "a"])  # 'x' is not an answer: asked again
    made, reviewed = review(out, ask=lambda _: next(replies))
    assert made == 1 and [json.loads(line)["qid"] for line in reviewed.read_text().splitlines()] == [question.qid]
    assert review(out, ask=lambda _: "q")[0] == 0  # resumed: nothing left to review


def test_path_question_gold_comes_from_the_numbered_sentences() -> None:
    sentences = (
        EvidenceSentence("wifi-trouble", "The light blinks amber forever."),
        EvidenceSentence("reset-hub", QUOTE),
    )
    candidate = Candidate(
        "path", "a -> b -> c", "prompt", sentences, (("answer", "paper clip"),), answer_node="paper clip"
    )
    llm = LLMClient(FakeLLM(script=[generated("My box keeps blinking, what now?", (2,))]), cache={"enabled": False})
    texts = {"reset-hub": f"Intro. {QUOTE} More.", "wifi-trouble": "Other."}
    result = generate(llm, [candidate], texts)
    assert len(result.accepted) == 1 and result.accepted[0].qtype == "multi"
    assert [(g.page, g.quote) for g in result.accepted[0].gold] == [("reset-hub", QUOTE)]


def test_mechanical_problems_name_missing_pages() -> None:
    question = Question(qid="x", question="What now?", gold=[{"page": "nope", "quote": QUOTE}])
    assert mechanical_problems(question, {}, {}) == ["gold page 'nope' does not exist"]
