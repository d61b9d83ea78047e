"""The judge of an answers run: who it is, how it did on the graded set, and whether to believe it.

- `refuse_self_judging`: a model judging its own answers is refused unless the judge allows it.
- `measure_on_graded`: the run's judge grades the committed graded set (answers graded blind by people,
  `answer.graded`); Cohen's and weighted kappa with bootstrap CIs, per-fact agreement, PPI mean. An LLM
  judge's grades come from the LLM cache after the first run, so the check costs one pass per judge.
- `guard`: evaluation.judge_guard on the run's grades, closed-book vs retrieved recall, and the kappa.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fixgraph.answer.labelling import agreement_report, answer_item, judge_records, load_labels, read_answers
from fixgraph.answer.scoring import ScoredAnswer
from fixgraph.answer.settings import GradedSet
from fixgraph.config import ConfigError
from fixgraph.evaluation.judge import Judge
from fixgraph.evaluation.judge_guard import GuardReport, GuardSettings, check_judge
from fixgraph.evaluation.questions import load_questions

log = logging.getLogger(__name__)


def refuse_self_judging(judge: Judge, llm: Any) -> None:
    """A judge whose model is the answering model is a configuration error unless it allows it."""
    client = getattr(judge, "client", None)
    if client is None or getattr(judge, "allow_self", False):
        return
    if client.identity() == llm.identity():
        raise ConfigError(
            f"judge {judge.name}: judge.llm is the answering model ({llm.name}); a model grading its own answers "
            "is uninformative (issue 18). Choose another model (llm@judge.llm=<option>), judge=keyfacts, "
            "or set judge.allow_self=true to do it anyway"
        )


def measure_on_graded(
    judge: Judge, graded: GradedSet, alpha: float, resamples: int, seed: int
) -> dict[str, Any] | None:
    """The judge's agreement with people on the graded set; None when the set is not configured or absent."""
    if not graded.answers or not graded.labels or not graded.questions:
        return None
    paths = [Path(graded.answers), Path(graded.labels), Path(graded.questions)]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        log.warning("graded set not found (%s): the judge is not measured", ", ".join(missing))
        return None
    labels = load_labels(paths[1])
    records = [r for r in read_answers(paths[0]) if not r["abstained"] and answer_item(r) in labels]
    records.sort(key=answer_item)
    if graded.max_items:
        records = records[: graded.max_items]
    wanted = {str(r["qid"]) for r in records}
    questions = {q.qid: q for q in load_questions(paths[2]) if q.qid in wanted}
    unknown = sorted(wanted - set(questions))
    if unknown:  # a set made for other questions (another corpus): the run's answers are kept, the judge flagged
        log.warning(
            "graded set %s answers questions not in %s (%s...): the judge is not measured",
            graded.answers,
            graded.questions,
            ", ".join(unknown[:3]),
        )
        return None
    judgements = judge_records(judge, records, questions)
    report = agreement_report(labels, judgements, alpha, resamples, seed)
    report["graded_set"] = {"answers": graded.answers, "labels": graded.labels, "items": len(records)}
    return report


def guard(
    scored: Sequence[ScoredAnswer], closed_book: str | None, kappa: float | None, settings: GuardSettings
) -> GuardReport:
    answered = [s for s in scored if not s.answer.abstained]
    recall: dict[str, list[float | None]] = {}
    for s in answered:
        if s.question.answerable:
            recall.setdefault(s.answer.system, []).append(s.judgement.key_fact_recall)
    return check_judge([s.judgement.correctness for s in answered], recall, closed_book, kappa, settings)
