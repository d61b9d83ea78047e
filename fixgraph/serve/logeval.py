"""Scoring /diagnose on a question file of error logs (`qtype: log`), like any other question file.

The question of each line is a log; its gold quotes are anchored in the page that explains it. Two
rankings per log are scored with the evaluation's own metrics (ir-measures, BCa CIs): the served
System given the raw log as its query (what `fixgraph evaluate --questions` measures), and the
diagnosis (signatures + graph + the same System, fused). The paired comparison (permutation test,
Holm over a family declared here, before any score: diagnose vs the system on answer_page_hit@k, the
"right page in the top k" recall) says whether diagnosing beats pasting the log into search.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.config import systems_of
from fixgraph.evaluation.comparison import ComparisonSettings, Family, compare
from fixgraph.evaluation.gold import map_gold
from fixgraph.evaluation.questions import load_questions
from fixgraph.evaluation.report import markdown_table, summarise, summary_json
from fixgraph.evaluation.result import headline_metrics, per_question_table
from fixgraph.io import atomic_dir, sha256_file, write_json, write_text
from fixgraph.pipeline.graph import graph_dir
from fixgraph.pipeline.layout import Layout
from fixgraph.pipeline.stages import chunk, load_chunks, load_documents, open_system
from fixgraph.retrieval.base import Hit
from fixgraph.serve.diagnose import Diagnoser
from fixgraph.serve.graphview import GraphView
from fixgraph.serve.source import default_system

DIAGNOSE = "diagnose"


Search = Callable[[str, int], tuple[list[Hit], dict[str, float]]]


def open_diagnoser(cfg: DictConfig, system: str | None = None) -> tuple[str, Diagnoser, Search]:
    """(system name, diagnoser, its search) without a server: the System opened with `open_system`."""
    name = default_system(cfg, system or cfg.serve.get("system"))
    chunk(cfg)
    chunks = load_chunks(cfg)
    opened = open_system(cfg, name, systems_of(cfg)[name], chunks)
    folder = graph_dir(cfg)
    graph = GraphView.load(folder) if (folder / "nodes.parquet").exists() else None
    diagnoser = Diagnoser({d.id: d for d in load_documents(cfg)}, chunks, graph)

    def search(query: str, k: int) -> tuple[list[Hit], dict[str, float]]:
        return opened.search(query, k), dict(opened.last_timings)

    return name, diagnoser, search


def evaluate_logs(cfg: DictConfig, questions_path: Path, system: str | None = None) -> dict[str, Any]:
    questions = load_questions(questions_path)  # a bad file fails before anything is opened
    name, diagnoser, search = open_diagnoser(cfg, system)
    docs, chunks = load_documents(cfg), load_chunks(cfg)
    mapping = map_gold(questions, docs, chunks)
    mapping.check(float(cfg.evaluation.min_gold_coverage))
    depth = int(cfg.evaluation.depth)

    rankings: dict[str, dict[str, list[Hit]]] = {name: {}, DIAGNOSE: {}}
    timings: list[dict[str, Any]] = []
    for q in questions:
        started = time.perf_counter()
        rankings[name][q.qid] = search(q.question, depth)[0]
        timings.append({"system": name, "qid": q.qid, "total_ms": 1000 * (time.perf_counter() - started)})
        started = time.perf_counter()
        rankings[DIAGNOSE][q.qid] = diagnoser.diagnose(q.question, search, depth).ranking
        timings.append({"system": DIAGNOSE, "qid": q.qid, "total_ms": 1000 * (time.perf_counter() - started)})
    doc_of = {c.id: c.doc_id for c in chunks}
    per_question = per_question_table(cfg, questions, mapping, rankings, doc_of, timings)
    boot = cfg.evaluation.bootstrap
    scored = per_question[per_question["scored"]]
    summary = summarise(scored, int(boot.resamples), float(boot.confidence), int(boot.seed))
    k = int(cfg.evaluation.main_k)
    page_metrics = [f"answer_page_hit_at_{n}" for n in (1, 3, k)]
    reported = list(dict.fromkeys([*page_metrics, *headline_metrics(cfg)]))
    family = Family.declare(name, [name, DIAGNOSE], [f"answer_page_hit_at_{k}"])
    comparison = compare(scored, reported, name, [name, DIAGNOSE], family, ComparisonSettings.from_config(cfg))
    table = markdown_table(summary, reported, float(boot.confidence)) + "\n" + comparison.markdown()
    layout = Layout.from_config(cfg)
    out = layout.eval_dir(f"diagnose_{questions_path.stem}")
    info = {
        "questions_file": str(questions_path),
        "questions_hash": sha256_file(questions_path),
        "questions": len(questions),
        "scored_questions": int(scored["qid"].nunique()),
        "gold_coverage": mapping.coverage,
        "corpus": str(cfg.corpus.name),
        "system": name,
        "graph": diagnoser.graph is not None,
        "latency_ms_p50": {s: float(per_question[per_question["system"] == s]["total_ms"].median()) for s in rankings},
    }
    with atomic_dir(out) as tmp:
        per_question.to_parquet(tmp / "per_question.parquet", index=False)
        write_json(tmp / "metrics.json", summary_json(summary))
        write_json(tmp / "comparison.json", comparison.to_json())
        write_json(tmp / "info.json", info)
        write_text(tmp / "table.md", table)
    return {"table": table, "output": str(out), **info}
