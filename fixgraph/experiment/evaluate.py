"""The evaluate stage: run every configured system over a question file and score it.

Writes, under artifacts/eval/<corpus>/<name>/: the gold mapping, qrels and one TREC run per system
(so any metric can be recomputed elsewhere), the per-question table, metrics with CIs and the
markdown table, and under `_run/` (it differs run to run) latency and what each system cost (index
build and size, loading, LLM calls and tokens per query: `cost.md`); then records the run in MLflow.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.config import systems_of
from fixgraph.evaluation.cost import cost_table, system_cost
from fixgraph.evaluation.gold import map_gold
from fixgraph.evaluation.questions import Question
from fixgraph.evaluation.report import latency_summary, markdown_table, summarise, summary_json
from fixgraph.evaluation.result import EvaluationResult, headline_metrics, per_question_table
from fixgraph.evaluation.splits import resolve_questions
from fixgraph.evaluation.trec import write_qrels, write_run
from fixgraph.experiment.analyses import fingerprints, write_analyses
from fixgraph.io import RUN_DIR, atomic_dir, read_json, sha256_file, write_json, write_jsonl, write_text
from fixgraph.llm.usage import metering
from fixgraph.pipeline.layout import Layout
from fixgraph.pipeline.stages import chunk, load_chunks, load_documents, open_system
from fixgraph.retrieval.base import Hit
from fixgraph.retrieval.system import System
from fixgraph.training.stages import require_models

log = logging.getLogger(__name__)


def rank_all(
    cfg: DictConfig,
    questions: list[Question],
    chunks: list[Any],
    traces: dict[str, list[Any]] | None = None,
    costs: dict[str, dict[str, Any]] | None = None,
) -> tuple[dict[str, dict[str, list[Hit]]], list[dict[str, Any]]]:
    """system -> qid -> ranking, and per-question timings of each stage. Systems whose first stage can
    say what it linked a question to (graph retrievers: their seeds) have it recorded into `traces`;
    what each system's index and LLM calls cost goes into `costs`."""
    depth = int(cfg.evaluation.depth)
    rankings: dict[str, dict[str, list[Hit]]] = {}
    timings: list[dict[str, Any]] = []
    require_models(cfg, systems_of(cfg))  # before any system ranks: nothing done is lost
    for name, system_cfg in systems_of(cfg).items():
        system = open_system(cfg, name, system_cfg, chunks)
        rankings[name] = {}
        with metering() as llm_usage:
            _rank_questions(system, name, questions, depth, rankings[name], timings, traces)
        if costs is not None:
            costs[name] = system_cost(system.index_cost, llm_usage.totals(), len(questions))
    return rankings, timings


def _rank_questions(
    system: System,
    name: str,
    questions: list[Question],
    depth: int,
    ranking: dict[str, list[Hit]],
    timings: list[dict[str, Any]],
    traces: dict[str, list[Any]] | None,
) -> None:
    for question in questions:
        started = time.perf_counter()
        ranking[question.qid] = system.search(question.question, depth)
        elapsed = 1000 * (time.perf_counter() - started)
        stage_ms = {f"stage_{k}": v for k, v in system.last_timings.items()}
        if traces is not None and (trace := system.trace(question.question)) is not None:
            traces.setdefault(name, []).append({"qid": question.qid, **trace})
        timings.append(
            {
                "system": name,
                "qid": question.qid,
                "retrieve_ms": stage_ms.pop("stage_first_stage_ms"),
                "rerank_ms": stage_ms.pop("stage_rerank_ms"),
                "total_ms": elapsed,
                **stage_ms,
            }
        )


def evaluate(
    cfg: DictConfig,
    questions_path: Path | None = None,
    name: str | None = None,
    track: bool | None = None,
) -> EvaluationResult:
    layout = Layout.from_config(cfg)
    question_set = resolve_questions(cfg, questions_path, name)  # fails before any work (locked questions too)
    questions, name = question_set.questions, question_set.name
    chunk_result = chunk(cfg)
    docs, chunks = load_documents(cfg), load_chunks(cfg)
    mapping = map_gold(questions, docs, chunks)
    # (.get: finalists recorded before `allow_unmapped` existed replay their own config at test time)
    gold_report = mapping.check(
        float(cfg.evaluation.min_gold_coverage), questions, bool(cfg.evaluation.get("allow_unmapped", False))
    )
    traces: dict[str, list[Any]] = {}
    costs: dict[str, dict[str, Any]] = {}
    rankings, timings = rank_all(cfg, questions, chunks, traces, costs)
    doc_of = {c.id: c.doc_id for c in chunks}
    per_question = per_question_table(cfg, questions, mapping, rankings, doc_of, timings)
    boot = cfg.evaluation.bootstrap
    summary = summarise(per_question, int(boot.resamples), float(boot.confidence), int(boot.seed))
    table = markdown_table(summary, headline_metrics(cfg), float(boot.confidence))
    manifest = read_json(layout.manifest)
    info = {
        "name": name,
        **question_set.provenance(),
        "question_set_hash": question_set.content_hash,
        "questions": len(questions),
        "scored_questions": int(per_question.groupby("system")["scored"].sum().iloc[0]),
        "locked_excluded": question_set.exclusion(),
        "gold_quotes": len(mapping.items),
        "gold_coverage": mapping.coverage,
        "unmapped_gold": gold_report,
        "corpus": manifest["corpus"],
        "corpus_hash": manifest["corpus_hash"],
        "corpus_version": manifest["source"].get("version", ""),
        "chunks": len(chunks),
        "chunks_hash": sha256_file(layout.chunks),
        "chunker": chunk_result.info,
        "systems": list(rankings),
        "latency": latency_summary(per_question),
        "cost": costs,
    }
    info["fingerprints"] = fingerprints(cfg, questions, manifest["corpus_hash"], info["chunks_hash"])
    metrics = summary_json(summary)
    out = layout.eval_dir(name)
    with atomic_dir(out) as tmp:
        write_jsonl(tmp / "gold_mapping.jsonl", (item.__dict__ for item in mapping.items))
        write_text(tmp / "unmapped_gold.txt", "".join(f"{line}\n" for line in gold_report))
        write_qrels(tmp / "qrels.txt", mapping.qrels())
        for system, ranking in rankings.items():
            write_run(tmp / "runs" / f"{system}.trec", ranking, tag=system)
        for system, rows in traces.items():
            write_jsonl(tmp / "traces" / f"{system}.jsonl", rows)
        # latency differs run to run: it goes under _run/ (outside DVC's hashes), the scores stay byte-stable
        timing = [c for c in per_question.columns if c.endswith("_ms")]
        (tmp / RUN_DIR).mkdir()
        per_question.drop(columns=timing).to_parquet(tmp / "per_question.parquet", index=False)
        per_question[["system", "qid", *timing]].to_parquet(tmp / RUN_DIR / "timings.parquet", index=False)
        info.update(write_analyses(cfg, questions, mapping, rankings, doc_of, per_question, headline_metrics(cfg), tmp))
        write_json(tmp / "metrics.json", metrics)
        write_json(tmp / "info.json", {k: v for k, v in info.items() if k not in ("latency", "cost")})
        write_json(tmp / RUN_DIR / "latency.json", info["latency"])
        write_json(tmp / RUN_DIR / "cost.json", costs)
        write_text(tmp / RUN_DIR / "cost.md", cost_table(costs, info["latency"]))
        write_text(tmp / "table.md", table)
    write_json(layout.metrics_file(name), {s: {m: v["mean"] for m, v in ms.items()} for s, ms in metrics.items()})
    log.info("evaluation %s (%d questions) written to %s", name, len(questions), out)
    result = EvaluationResult(name, out, table, metrics, per_question, mapping.coverage, info)
    if track if track is not None else bool(cfg.tracking.enabled):
        from fixgraph.experiment.analyses import mlflow_extras
        from fixgraph.tracking import log_evaluation

        result.mlflow_run_id = log_evaluation(cfg, result, lambda system: mlflow_extras(out, info, system))
    return result
