"""Per-question retrieval metrics: ir-measures for the standard ones, plus our support-set metrics.

- recall_at_k, precision_at_k, mrr, ndcg_at_k: ir-measures (trec_eval) over binary chunk qrels;
- support_complete_at_k: 1 if every gold quote has at least one of its chunks in the top k;
- answer_page_hit_at_k: 1 if a chunk of an answer page (the bridge target for bridge questions,
  else a gold page) is in the top k.
Only answerable questions with at least one mapped quote are scored; the rest are counted apart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ir_measures
import pandas as pd

from fixgraph.evaluation.gold import GoldMapping
from fixgraph.evaluation.questions import Question
from fixgraph.retrieval.base import Hit


def metric_name(measure: str, k: int | None = None) -> str:
    """MLflow metric names may not contain '@': recall@8 -> recall_at_8."""
    return f"{measure}_at_{k}" if k is not None else measure


def rank_scores(ranking: Sequence[Hit]) -> dict[str, float]:
    """Scores that reproduce our order exactly in trec_eval (which re-sorts by score, then by id)."""
    return {hit.chunk_id: float(len(ranking) - rank) for rank, hit in enumerate(ranking)}


def scorable(questions: Sequence[Question], mapping: GoldMapping) -> list[Question]:
    mapped = {i.qid for i in mapping.items if i.status == "mapped"}
    return [q for q in questions if q.answerable and q.qid in mapped]


def retrieval_metrics(
    questions: Sequence[Question],
    mapping: GoldMapping,
    rankings: Mapping[str, Sequence[Hit]],
    doc_of: Mapping[str, str],
    ks: Sequence[int],
    ndcg_k: int,
) -> pd.DataFrame:
    """One row per scorable question, one column per metric; `doc_of` maps chunk id -> page id."""
    scored = scorable(questions, mapping)
    qrels = {qid: rels for qid, rels in mapping.qrels().items() if qid in {q.qid for q in scored}}
    run = {q.qid: rank_scores(rankings.get(q.qid, [])) for q in scored}
    measures = [ir_measures.R @ k for k in ks] + [ir_measures.P @ k for k in ks]
    measures += [ir_measures.RR, ir_measures.nDCG @ ndcg_k]
    names = {ir_measures.R @ k: metric_name("recall", k) for k in ks}
    names.update({ir_measures.P @ k: metric_name("precision", k) for k in ks})
    names[ir_measures.RR] = "mrr"
    names[ir_measures.nDCG @ ndcg_k] = metric_name("ndcg", ndcg_k)
    rows: dict[str, dict[str, float]] = {q.qid: {name: 0.0 for name in names.values()} for q in scored}
    for metric in ir_measures.iter_calc(measures, qrels, {qid: r for qid, r in run.items() if r}):
        rows[metric.query_id][names[metric.measure]] = float(metric.value)
    for question in scored:
        ranked = [h.chunk_id for h in rankings.get(question.qid, [])]
        items = [i for i in mapping.for_question(question.qid) if i.status == "mapped"]
        for k in ks:
            top = set(ranked[:k])
            top_pages = {doc_of[cid] for cid in top}
            rows[question.qid][metric_name("support_complete", k)] = float(
                all(top.intersection(i.chunk_ids) for i in items)
            )
            rows[question.qid][metric_name("answer_page_hit", k)] = float(
                bool(top_pages & mapping.answer_pages(question))
            )
    frame = pd.DataFrame.from_dict(rows, orient="index")
    frame.index.name = "qid"
    qtypes = {q.qid: q.qtype for q in scored}
    frame.insert(0, "qtype", [qtypes[qid] for qid in frame.index])
    return frame
