"""The evaluate stage: run every configured system over a question file and score it.

Writes, under artifacts/eval/<corpus>/<name>/: the gold mapping, qrels and one TREC run per system
(so any metric can be recomputed elsewhere), the per-question table, metrics with CIs and the
markdown table; then records the run in MLflow.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from fixgraph.config import systems_of
from fixgraph.evaluation.gold import GoldMapping, map_gold
from fixgraph.evaluation.metrics import metric_name, retrieval_metrics, scorable
from fixgraph.evaluation.questions import Question, load_questions
from fixgraph.evaluation.report import latency_summary, markdown_table, summarise, summary_json
from fixgraph.evaluation.splits import build_split
from fixgraph.evaluation.trec import write_qrels, write_run
from fixgraph.experiment.analyses import fingerprints, write_analyses
from fixgraph.experiment.layout import Layout
from fixgraph.experiment.stages import chunk, load_chunks, load_documents, open_retriever
from fixgraph.io import atomic_dir, read_json, sha256_file, write_json, write_jsonl, write_text
from fixgraph.retrieval.base import Hit
from fixgraph.retrieval.rerank import build_reranker

log = logging.getLogger(__name__)


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


def headline_metrics(cfg: DictConfig) -> list[str]:
    k = int(cfg.evaluation.main_k)
    return [
        metric_name("recall", k),
        "mrr",
        metric_name("ndcg", int(cfg.evaluation.ndcg_k)),
        metric_name("support_complete", k),
        metric_name("answer_page_hit", k),
    ]


def resolve_questions(
    cfg: DictConfig, questions_path: Path | None, name: str | None
) -> tuple[list[Question], Path, str]:
    """Questions come from `--questions FILE` (any file in the shared format) or the configured split."""
    if questions_path is not None:
        return load_questions(questions_path), questions_path, name or questions_path.stem
    split = build_split(cfg.split)
    return split.load(), split.questions_path, name or split.name


def rank_all(
    cfg: DictConfig, questions: list[Question], chunks: list[Any], traces: dict[str, list[Any]] | None = None
) -> tuple[dict[str, dict[str, list[Hit]]], list[dict[str, Any]]]:
    """system -> qid -> ranking, and per-question timings of each stage. Retrievers with a `trace`
    method (graph retrievers: their seeds) have it recorded per question into `traces`."""
    depth = int(cfg.evaluation.depth)
    reranker = build_reranker(cfg.reranker)
    texts = {c.id: c.index_text() for c in chunks}
    rankings: dict[str, dict[str, list[Hit]]] = {}
    timings: list[dict[str, Any]] = []
    for system, system_cfg in systems_of(cfg).items():
        retriever = open_retriever(cfg, system, system_cfg, chunks)
        rankings[system] = {}
        for question in questions:
            started = time.perf_counter()
            hits = retriever.search(question.question, depth)
            retrieved = time.perf_counter()
            hits = reranker.rerank(question.question, hits, texts)
            reranked = time.perf_counter()
            rankings[system][question.qid] = hits
            # per-stage times a retriever reports for its last search (embed, channels, fusion, rerank...)
            stages_ms = {f"stage_{k}": v for k, v in getattr(retriever, "last_timings", {}).items()}
            if traces is not None and hasattr(retriever, "trace"):
                traces.setdefault(system, []).append({"qid": question.qid, **retriever.trace(question.question)})
            timings.append(
                {
                    "system": system,
                    "qid": question.qid,
                    "retrieve_ms": 1000 * (retrieved - started),
                    "rerank_ms": 1000 * (reranked - retrieved),
                    **stages_ms,
                }
            )
    return rankings, timings


def score(
    cfg: DictConfig,
    questions: list[Question],
    mapping: GoldMapping,
    rankings: dict[str, dict[str, list[Hit]]],
    doc_of: dict[str, str],
    timings: list[dict[str, Any]],
) -> pd.DataFrame:
    """Long table: one row per (system, question); metrics NaN where a question is not scored."""
    ks = [int(k) for k in cfg.evaluation.ks]
    scored = {q.qid for q in scorable(questions, mapping)}
    frames = []
    for system, ranking in rankings.items():
        frame = retrieval_metrics(questions, mapping, ranking, doc_of, ks, int(cfg.evaluation.ndcg_k))
        frame = frame.drop(columns="qtype").reindex([q.qid for q in questions])
        frame.insert(0, "scored", [q.qid in scored for q in questions])
        frame.insert(0, "qtype", [q.qtype for q in questions])
        frame.insert(0, "system", system)
        frames.append(frame.reset_index())
    table = pd.concat(frames, ignore_index=True)
    return table.merge(pd.DataFrame(timings), on=["system", "qid"], how="left")


def evaluate(
    cfg: DictConfig,
    questions_path: Path | None = None,
    name: str | None = None,
    track: bool | None = None,
) -> EvaluationResult:
    layout = Layout.from_config(cfg)
    questions, questions_path, name = resolve_questions(cfg, questions_path, name)  # fails before any work
    chunk_result = chunk(cfg)
    docs, chunks = load_documents(cfg), load_chunks(cfg)
    mapping = map_gold(questions, docs, chunks)
    mapping.check(float(cfg.evaluation.min_gold_coverage))
    traces: dict[str, list[Any]] = {}
    rankings, timings = rank_all(cfg, questions, chunks, traces)
    doc_of = {c.id: c.doc_id for c in chunks}
    per_question = score(cfg, questions, mapping, rankings, doc_of, timings)
    boot = cfg.evaluation.bootstrap
    summary = summarise(per_question, int(boot.resamples), float(boot.confidence), int(boot.seed))
    table = markdown_table(summary, headline_metrics(cfg), float(boot.confidence))
    manifest = read_json(layout.manifest)
    info = {
        "name": name,
        "questions_file": str(questions_path),
        "questions_hash": sha256_file(questions_path),
        "questions": len(questions),
        "scored_questions": int(per_question.groupby("system")["scored"].sum().iloc[0]),
        "gold_quotes": len(mapping.items),
        "gold_coverage": mapping.coverage,
        "corpus": manifest["corpus"],
        "corpus_hash": manifest["corpus_hash"],
        "corpus_version": manifest["source"].get("version", ""),
        "chunks": len(chunks),
        "chunks_hash": sha256_file(layout.chunks),
        "chunker": chunk_result.info,
        "systems": list(rankings),
        "latency": latency_summary(per_question),
    }
    info["fingerprints"] = fingerprints(cfg, questions, manifest["corpus_hash"], info["chunks_hash"])
    metrics = summary_json(summary)
    out = layout.eval_dir(name)
    with atomic_dir(out) as tmp:
        write_jsonl(tmp / "gold_mapping.jsonl", (item.__dict__ for item in mapping.items))
        write_qrels(tmp / "qrels.txt", mapping.qrels())
        for system, ranking in rankings.items():
            write_run(tmp / "runs" / f"{system}.trec", ranking, tag=system)
        for system, rows in traces.items():
            write_jsonl(tmp / "traces" / f"{system}.jsonl", rows)
        per_question.to_parquet(tmp / "per_question.parquet", index=False)
        info.update(write_analyses(cfg, questions, mapping, rankings, per_question, headline_metrics(cfg), tmp))
        write_json(tmp / "metrics.json", metrics)
        write_json(tmp / "info.json", info)
        write_text(tmp / "table.md", table)
    write_json(layout.metrics_file(name), {s: {m: v["mean"] for m, v in ms.items()} for s, ms in metrics.items()})
    result = EvaluationResult(name, out, table, metrics, per_question, mapping.coverage, info)
    if track if track is not None else bool(cfg.tracking.enabled):
        from fixgraph.experiment.tracking import log_evaluation

        result.mlflow_run_id = log_evaluation(cfg, result)
    return result
