"""Answer-metric interface: citation and abstention metrics by hand, judge and claim checker plugged in."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from fixgraph.evaluation.answer_metrics import (
    AnswerRecord,
    Claim,
    abstention_scores,
    answer_frame,
    score_answer,
)
from fixgraph.evaluation.judge import Judgement, NoJudge
from fixgraph.evaluation.questions import Question
from tests.unit.test_metrics import MAPPING, QUESTIONS


class ScriptedJudge:
    name = "scripted"

    def judge(self, question: Question, answer: str) -> Judgement:
        return Judgement(1.0 if "reset" in answer else 0.0, 0.5)


class KeywordChecker:
    """Supported when the claim's first word occurs in a cited chunk's text."""

    def check(self, claim: Claim, texts: Mapping[str, str]) -> bool | None:
        if not claim.cited_chunks:
            return None
        word = claim.text.split()[0]
        return any(word in texts.get(c, "") for c in claim.cited_chunks)


def test_citation_metrics_by_hand() -> None:
    q1 = QUESTIONS[0]  # gold quotes: a -> {a#0, a#1}, b -> {b#0}
    record = AnswerRecord("q1", "reset it", cited_chunks=("a#1", "x#0", "a#1"))
    scores = score_answer(q1, record, MAPPING, ScriptedJudge())
    assert scores.citation_precision == pytest.approx(1 / 2)  # a#1 gold, x#0 not (a duplicate cite counts once)
    assert scores.citation_recall == pytest.approx(1 / 2)  # quote a covered, quote b not
    assert (scores.correctness, scores.key_fact_recall) == (1.0, 0.5)
    assert scores.unsupported_claim_rate is None  # no checker configured


def test_unsupported_claims_use_the_checker() -> None:
    claims = (
        Claim("Hold the button", ("a#0",)),
        Claim("Microwaves interfere", ("a#0",)),
        Claim("Unchecked claim"),  # no citation: the checker cannot tell, so it is not counted
    )
    record = AnswerRecord("q1", "x", cited_chunks=("a#0",), claims=claims)
    texts = {"a#0": "Hold the Reset button"}
    scores = score_answer(QUESTIONS[0], record, MAPPING, NoJudge(), KeywordChecker(), texts)
    assert scores.unsupported_claim_rate == pytest.approx(1 / 2)
    assert scores.correctness is None


def test_abstention_precision_and_recall_by_hand() -> None:
    unanswerable = QUESTIONS[2]
    scores = [
        score_answer(QUESTIONS[0], AnswerRecord("q1", "", abstained=True), MAPPING, NoJudge()),  # wrong abstention
        score_answer(QUESTIONS[1], AnswerRecord("q2", "reset", ("c#0",)), MAPPING, NoJudge()),
        score_answer(unanswerable, AnswerRecord("q3", "", abstained=True), MAPPING, NoJudge()),  # right one
    ]
    assert abstention_scores(scores) == {"abstention_precision": 0.5, "abstention_recall": 1.0}
    assert scores[0].citation_recall is None and scores[2].citation_precision is None
    frame = answer_frame("rag", scores)
    assert list(frame["system"].unique()) == ["rag"]
    assert frame["citation_precision"].isna().tolist() == [True, False, True]
