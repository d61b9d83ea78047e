"""One answer, fully scored: the per-question row of the answer tables.

Gold view (citations against the question's gold chunks) comes from `evaluation.answer_metrics`; the
support view (a citation is correct when its chunk supports the sentence, gold or not) and the
unsupported-claim rate from the claim verifier; correctness and key-fact recall from the judge; the
reference-free metrics from `answer.ragas`. Rules fixed here, not by a model:
- an abstention is graded without the judge: correct (1) on an unanswerable question, wrong (0, no key
  fact) on an answerable one; its citation, claim and RAGAS metrics are None ("not applicable");
- a metric that does not apply is None (NaN in the frame), so means skip it instead of counting a 0;
- key_fact_coverage is deterministic (`evaluation.keyfacts`), whatever the judge: an abstention on an
  answerable question covers no fact (0), an unanswerable question has no facts (None).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fixgraph.answer.base import GroundedAnswer
from fixgraph.answer.ragas import RagasScores
from fixgraph.answer.verify import Verification
from fixgraph.evaluation.answer_metrics import AnswerRecord, score_answer
from fixgraph.evaluation.gold import GoldMapping
from fixgraph.evaluation.judge import Judgement
from fixgraph.evaluation.keyfacts import Coverage
from fixgraph.evaluation.questions import Question
from fixgraph.llm.usage import StageCost

STAGES = ("retrieve", "answer", "verify", "judge", "relevance")
QUALITY_METRICS = (
    "correctness",
    "human_correctness",  # people's grades (answer.labels), where this run's answers are labelled
    "key_fact_coverage",
    "key_fact_recall",
    "citation_precision_gold",
    "citation_recall_gold",
    "citation_precision_support",
    "citation_recall_support",
    "unsupported_claim_rate",
    "faithfulness",
    "answer_relevance",
    "context_precision",
    "abstained",
    "truncated",
)


class _Given:
    """A judge that returns a judgement decided beforehand (score_answer asks its judge)."""

    name = "given"

    def __init__(self, judgement: Judgement) -> None:
        self.judgement = judgement

    def identity(self) -> str:
        return "given"

    def judge(self, question: Question, answer: str) -> Judgement:
        return self.judgement


def abstention_judgement(question: Question) -> Judgement:
    if question.answerable:
        return Judgement(0.0, 0.0 if question.key_facts else None, "abstained on an answerable question")
    return Judgement(1.0, None, "abstained on an unanswerable question")


@dataclass
class ScoredAnswer:
    question: Question
    answer: GroundedAnswer
    verification: Verification
    judgement: Judgement
    ragas: RagasScores
    retrieve_seconds: float = 0.0
    coverage: Coverage | None = None  # deterministic key-fact coverage (None: the question has no facts)
    item: str = ""  # opaque id (labelling.item_id) the label files use
    llm: str = ""  # the answering model's config name

    @property
    def key_fact_coverage(self) -> float | None:
        if not self.question.key_facts or not self.question.answerable:
            return None
        if self.answer.abstained or self.coverage is None:
            return 0.0
        return self.coverage.recall

    def row(self, mapping: GoldMapping) -> dict[str, Any]:
        q, a, v = self.question, self.answer, self.verification
        record = AnswerRecord(q.qid, a.text, a.cited_chunks, a.abstained)
        gold = score_answer(q, record, mapping, _Given(self.judgement))
        answered = not a.abstained
        row: dict[str, Any] = {
            "system": a.system,
            "qid": q.qid,
            "qtype": q.qtype,
            "scored": True,
            "answerable": q.answerable,
            "abstained": float(a.abstained),
            "correctness": gold.correctness,
            "key_fact_coverage": self.key_fact_coverage,
            "key_fact_recall": gold.key_fact_recall,
            "citation_precision_gold": gold.citation_precision if answered else None,
            "citation_recall_gold": gold.citation_recall,
            "citation_precision_support": v.citation_precision if answered else None,
            "citation_recall_support": v.citation_recall if answered else None,
            "unsupported_claim_rate": v.unsupported_rate if answered else None,
            "faithfulness": self.ragas.faithfulness,
            "answer_relevance": self.ragas.answer_relevance,
            "context_precision": self.ragas.context_precision,
            "truncated": float(a.truncated) if answered else None,
            "sentences": float(len(a.sentences)),
            "stripped_citations": float(a.stripped_citations),
            "context_tokens": float(a.context_tokens),
        }
        costs: Mapping[str, StageCost] = {**a.cost}
        total_tokens = 0
        for stage in STAGES[1:]:
            cost = costs.get(stage, StageCost())
            tokens = cost.input_tokens + cost.output_tokens
            total_tokens += tokens
            row[f"tokens_{stage}"] = float(tokens)
            row[f"{stage}_ms"] = 1000 * cost.seconds
            row[f"{stage}_model_ms"] = 1000 * cost.model_seconds
        row["tokens_total"] = float(total_tokens)
        row["retrieve_ms"] = 1000 * self.retrieve_seconds
        row["total_ms"] = sum(row[f"{s}_ms"] for s in STAGES)
        row["total_model_ms"] = row["retrieve_ms"] + sum(row[f"{s}_model_ms"] for s in STAGES[1:])
        return row

    def record(self) -> dict[str, Any]:
        """The JSON line of answers.jsonl: everything needed to audit or re-judge the answer."""
        a = self.answer
        return {
            "item": self.item,
            "qid": a.qid,
            "system": a.system,
            "llm": self.llm,
            "question": self.question.question,
            "answer": a.text,
            "abstained": a.abstained,
            "truncated": a.truncated,
            "abstain_reason": a.abstain_reason,
            "reply_format": a.reply_format,
            "prompt_version": a.prompt_version,
            "retrieved": a.retrieved,
            "context_ids": a.context_ids,
            "context_tokens": a.context_tokens,
            "stripped_citations": a.stripped_citations,
            "sentences": [
                {"text": s.text, "citations": list(s.citations), "verdicts": s.reasons, "supported": s.supported}
                for s in self.verification.sentences
            ],
            "verifier_reasons": self.verification.reason_counts(),
            "judge": {
                "correctness": self.judgement.correctness,
                "key_fact_recall": self.judgement.key_fact_recall,
                "covered": None if self.judgement.covered is None else list(self.judgement.covered),
                "rationale": self.judgement.rationale,
            },
            "key_facts": {
                "coverage": self.key_fact_coverage,
                "covered": None if self.coverage is None else self.coverage.covered,
            },
            "cost": {stage: vars(cost) for stage, cost in a.cost.items()},
        }
