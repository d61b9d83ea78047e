"""Parity of the two BM25 backends (bm25s vs Lucene/pyserini) on the split's questions.

Both use the same pinned k1, b and analyzer (conf/retriever/bm25.yaml), so differences come from the
scoring engines (Lucene's lossy document-length norms, query-term handling). Reports the mean top-10
overlap (|A@10 ∩ B@10| / 10), the share of questions with identical top-10 order, the rank-1 agreement,
the recall@8/@10, MRR and nDCG@10 of each backend, and each backend's p50 query time and QPS.
"""

from __future__ import annotations

import statistics
from functools import partial
from typing import Any

from omegaconf import DictConfig

from fixgraph.bench.retrieval import system_cfg, timed
from fixgraph.evaluation.gold import map_gold
from fixgraph.evaluation.metrics import retrieval_metrics
from fixgraph.evaluation.splits import build_split
from fixgraph.pipeline.stages import chunk, load_chunks, load_documents, open_system


def run(cfg: DictConfig) -> dict[str, Any]:
    questions = build_split(cfg.split).load()
    chunk(cfg)
    chunks, docs = load_chunks(cfg), load_documents(cfg)
    mapping = map_gold(questions, docs, chunks)
    doc_of = {c.id: c.doc_id for c in chunks}
    depth = int(cfg.evaluation.depth)
    backends = {"bm25s": "bm25", "pyserini": "bm25_lucene"}
    rankings: dict[str, dict[str, list[Any]]] = {}
    out: dict[str, Any] = {"questions": len(questions), "backends": {}}
    for backend, option in backends.items():
        node = system_cfg(cfg, option)
        retriever = open_system(cfg, f"bench-{option}", node, chunks)
        rankings[backend] = {q.qid: retriever.search(q.question, depth) for q in questions}
        metrics = retrieval_metrics(questions, mapping, rankings[backend], doc_of, [8, 10], 10)
        speed = timed(partial(retriever.search, k=depth), [q.question for q in questions])
        out["backends"][backend] = {
            "k1": float(node.k1),
            "b": float(node.b),
            "analyzer": dict(node.analyzer),
            "recall_at_8": round(float(metrics["recall_at_8"].mean()), 4),
            "recall_at_10": round(float(metrics["recall_at_10"].mean()), 4),
            "mrr": round(float(metrics["mrr"].mean()), 4),
            "ndcg_at_10": round(float(metrics["ndcg_at_10"].mean()), 4),
            "scored_questions": len(metrics),
            **speed,
            "qps": round(1000 / speed["p50_ms"], 1),
        }
    overlap, identical, top1 = [], 0, 0
    for q in questions:
        a = [h.chunk_id for h in rankings["bm25s"][q.qid][:10]]
        b = [h.chunk_id for h in rankings["pyserini"][q.qid][:10]]
        overlap.append(len(set(a) & set(b)) / 10)
        identical += a == b
        top1 += bool(a) and bool(b) and a[0] == b[0]
    out["top10_overlap_mean"] = round(statistics.mean(overlap), 4)
    out["top10_overlap_min"] = round(min(overlap), 4)
    out["identical_top10_share"] = round(identical / len(questions), 4)
    out["top1_agreement"] = round(top1 / len(questions), 4)
    out["bm25s_speedup"] = round(out["backends"]["pyserini"]["p50_ms"] / out["backends"]["bm25s"]["p50_ms"], 3)
    return out
