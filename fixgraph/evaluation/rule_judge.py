"""The `keyfacts` judge: grades from deterministic key-fact coverage, no model (the default judge).

correctness = 1 when the covered share of the question's key facts reaches `correct_at`, 0.5 when it
reaches `partial_at`, else 0; key_fact_recall = the covered share. A question without key facts
(unanswerable: "The help pages do not cover this.") is answered correctly only by declining: an answer
that says the thing cannot be done or is not covered gets 1, any other answer 0 (abstentions are graded
by rule before any judge). It cannot see wrong statements next to the right ones; its agreement with
people is measured on the graded set like any judge's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fixgraph.evaluation.judge import JUDGES, Judgement
from fixgraph.evaluation.keyfacts import KeyFactMatcher, build_keyfact_matcher
from fixgraph.evaluation.questions import Question

DECLINES = re.compile(
    r"\b(not (?:possible|supported|available|covered|documented|mentioned)|no (?:built-in|such|way|option|setting)"
    r"|(?:is|are)n't (?:possible|supported|available)|(?:does|do|can)(?: not|n't) (?:support|provide|offer|have|cover)"
    r"|cannot be|can't be|there is no|there's no|unable to|do(?:es)? not (?:contain|say|mention))\b",
    re.I,
)


@JUDGES.register("keyfacts")
class KeyFactJudge:
    deterministic = True

    def __init__(self, name: str, matcher: Mapping[str, Any], correct_at: float, partial_at: float) -> None:
        if not 0 < partial_at <= correct_at <= 1:
            raise ValueError(f"judge {name}: needs 0 < partial_at <= correct_at <= 1, got {partial_at}, {correct_at}")
        self.name = name
        self.matcher: KeyFactMatcher = build_keyfact_matcher(matcher)
        self.correct_at, self.partial_at = correct_at, partial_at

    def identity(self) -> str:
        return f"keyfacts:{self.matcher.identity()},correct>={self.correct_at},partial>={self.partial_at}"

    def judge(self, question: Question, answer: str) -> Judgement:
        if not question.key_facts:
            declined = bool(DECLINES.search(answer))
            return Judgement(1.0 if declined else 0.0, None, "declines" if declined else "answers the unanswerable")
        coverage = self.matcher.coverage(question.key_facts, answer)
        recall = coverage.recall or 0.0
        grade = 1.0 if recall >= self.correct_at else 0.5 if recall >= self.partial_at else 0.0
        n = len(question.key_facts)
        return Judgement(grade, recall, f"covered {coverage.covered} of {n}", tuple(coverage.covered), n)
