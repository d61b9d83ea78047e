"""Answer metrics: the interface the answering work fills in, and the parts computable without a model.

Per question (None where a metric does not apply, so means skip it rather than count it as 0):
- citation_precision: share of the chunks an answer cites that are gold chunks;
- citation_recall: share of the question's mapped gold quotes with at least one chunk cited;
- unsupported_claim_rate: share of checked claims that their cited text does not support (a
  `ClaimChecker` decides; none is configured yet, so this stays None until the answering work adds one);
- correctness, key_fact_recall: from the configured `Judge` (evaluation/judge.py);
- abstained / answerable: for abstention precision (abstentions on unanswerable questions / all
  abstentions) and recall (abstentions on unanswerable questions / unanswerable questions), which are
  set-level metrics computed over all questions by `abstention_scores`.
The per-question frame has the same shape as the retrieval one (system, qid, qtype, scored, metrics),
so `comparison.compare` tests answer metrics exactly as it tests retrieval metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

import pandas as pd

from fixgraph.evaluation.gold import GoldMapping
from fixgraph.evaluation.judge import Judge
from fixgraph.evaluation.questions import Question

ANSWER_METRICS = (
    "citation_precision",
    "citation_recall",
    "unsupported_claim_rate",
    "correctness",
    "key_fact_recall",
)


@dataclass(frozen=True)
class Claim:
    text: str
    cited_chunks: tuple[str, ...] = ()


@dataclass(frozen=True)
class AnswerRecord:
    """What an answering system produced for one question."""

    qid: str
    answer: str
    cited_chunks: tuple[str, ...] = ()
    abstained: bool = False
    claims: tuple[Claim, ...] = ()


class ClaimChecker(Protocol):
    """Decides whether a claim is supported by the text of the chunks it cites (None: cannot tell)."""

    def check(self, claim: Claim, texts: Mapping[str, str]) -> bool | None: ...


@dataclass(frozen=True)
class AnswerScores:
    qid: str
    qtype: str
    answerable: bool
    abstained: bool
    citation_precision: float | None
    citation_recall: float | None
    unsupported_claim_rate: float | None
    correctness: float | None
    key_fact_recall: float | None


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


def score_answer(
    question: Question,
    record: AnswerRecord,
    mapping: GoldMapping,
    judge: Judge,
    checker: ClaimChecker | None = None,
    texts: Mapping[str, str] | None = None,
) -> AnswerScores:
    if record.qid != question.qid:
        raise ValueError(f"answer for {record.qid!r} scored against question {question.qid!r}")
    items = [i for i in mapping.for_question(question.qid) if i.status == "mapped"]
    gold_chunks = {cid for item in items for cid in item.chunk_ids}
    cited = list(dict.fromkeys(record.cited_chunks))
    precision = _ratio(sum(c in gold_chunks for c in cited), len(cited)) if question.answerable else None
    recall = (
        _ratio(sum(bool(set(cited) & set(i.chunk_ids)) for i in items), len(items))
        if question.answerable and not record.abstained
        else None
    )
    unsupported = None
    if checker is not None and record.claims:
        verdicts = [checker.check(claim, texts or {}) for claim in record.claims]
        checked = [v for v in verdicts if v is not None]
        unsupported = _ratio(sum(not v for v in checked), len(checked))
    judgement = judge.judge(question, record.answer)
    return AnswerScores(
        qid=question.qid,
        qtype=question.qtype,
        answerable=question.answerable,
        abstained=record.abstained,
        citation_precision=precision,
        citation_recall=recall,
        unsupported_claim_rate=unsupported,
        correctness=judgement.correctness,
        key_fact_recall=judgement.key_fact_recall if question.answerable else None,
    )


def abstention_scores(scores: Sequence[AnswerScores]) -> dict[str, float | None]:
    """Abstention precision and recall over a set of questions (the unanswerable ones are the targets)."""
    correct = sum(s.abstained and not s.answerable for s in scores)
    return {
        "abstention_precision": _ratio(correct, sum(s.abstained for s in scores)),
        "abstention_recall": _ratio(correct, sum(not s.answerable for s in scores)),
    }


def answer_frame(system: str, scores: Sequence[AnswerScores]) -> pd.DataFrame:
    """Long per-question table (NaN where a metric does not apply), ready for comparison.compare."""
    frame = pd.DataFrame([asdict(s) for s in scores])
    frame.insert(0, "system", system)
    frame["scored"] = True
    for metric in ANSWER_METRICS:
        frame[metric] = pd.to_numeric(frame[metric], errors="coerce").astype(float)
    return frame
