"""What an evaluation produces: the per-question table of a set of rankings, and the result record."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fixgraph.evaluation.gold import GoldMapping
from fixgraph.evaluation.metrics import metric_name, retrieval_metrics, scorable
from fixgraph.evaluation.questions import Question
from fixgraph.retrieval.base import Hit


@dataclass
class EvaluationResult:
    name: str
    output_dir: Path
    table: str
    metrics: dict[str, Any]
    per_question: pd.DataFrame
    coverage: float
    info: dict[str, Any] = field(default_factory=dict)
    mlflow_run_id: str | None = None


def headline_metrics(cfg: Any) -> list[str]:
    k = int(cfg.evaluation.main_k)
    return [
        metric_name("recall", k),
        "mrr",
        metric_name("ndcg", int(cfg.evaluation.ndcg_k)),
        metric_name("support_complete", k),
        metric_name("answer_page_hit", k),
    ]


def per_question_table(
    cfg: Any,
    questions: Sequence[Question],
    mapping: GoldMapping,
    rankings: Mapping[str, Mapping[str, Sequence[Hit]]],
    doc_of: Mapping[str, str],
    timings: Sequence[Mapping[str, Any]],
) -> pd.DataFrame:
    """Long table: one row per (system, question); metrics NaN where a question is not scored."""
    ks = [int(k) for k in cfg.evaluation.ks]
    questions = list(questions)
    scored = {q.qid for q in scorable(questions, mapping)}
    frames = []
    for system, ranking in rankings.items():
        frame = retrieval_metrics(questions, mapping, dict(ranking), dict(doc_of), ks, int(cfg.evaluation.ndcg_k))
        frame = frame.drop(columns="qtype").reindex([q.qid for q in questions])
        frame.insert(0, "scored", [q.qid in scored for q in questions])
        frame.insert(0, "qtype", [q.qtype for q in questions])
        frame.insert(0, "system", system)
        frames.append(frame.reset_index())
    table = pd.concat(frames, ignore_index=True)
    return table.merge(pd.DataFrame(list(timings)), on=["system", "qid"], how="left")
