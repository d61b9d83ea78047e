"""Fusion and reranking variants scored from the candidate cache: no model runs, so a whole grid takes
seconds. Prints, per variant, recall@8, MRR and nDCG@10 on the split's scored questions, the candidates
it had to leave unscored, a paired permutation test against `hybrid` (RRF k=60, no rerank), and the
median time to re-score every question. Build the cache first: `fixgraph candidates`.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from fixgraph.evaluation.gold import map_gold
from fixgraph.evaluation.metrics import retrieval_metrics
from fixgraph.evaluation.significance import paired_permutation_tests
from fixgraph.evaluation.splits import build_split
from fixgraph.pipeline.candidates import open_cache
from fixgraph.pipeline.rescore import RescoreParams, rescore
from fixgraph.pipeline.stages import chunk, load_chunks, load_documents

METRICS = ("recall_at_8", "mrr", "ndcg_at_10")


def variants(scorers: list[str]) -> dict[str, RescoreParams]:
    out = {
        "bm25": RescoreParams(fusion="bm25"),
        "dense": RescoreParams(fusion="dense"),
        "hybrid": RescoreParams(rrf_k=60),
        **{f"hybrid_rrf_k{k}": RescoreParams(rrf_k=k) for k in (2, 10, 30)},
        **{
            f"hybrid_weighted_dense{w}": RescoreParams(
                fusion="weighted", channel_weights={"bm25": round(1 - w, 2), "dense": w}
            )
            for w in (0.5, 0.7, 0.9)
        },
    }
    for scorer in scorers:
        out[f"hybrid+{scorer}"] = RescoreParams(rrf_k=60, rerank_top_n=30, rerank_weights={scorer: 1.0})
        out[f"dense+{scorer}"] = RescoreParams(fusion="dense", rerank_top_n=30, rerank_weights={scorer: 1.0})
        for w in (0.3, 0.5, 0.7):
            out[f"hybrid+{scorer}_blend{w}"] = RescoreParams(
                rrf_k=60, rerank_top_n=30, rerank_weights={scorer: w, "first_stage": round(1 - w, 2)}
            )
            out[f"dense+{scorer}_blend{w}"] = RescoreParams(
                fusion="dense", rerank_top_n=30, rerank_weights={scorer: w, "first_stage": round(1 - w, 2)}
            )
    return out


def run(cfg: DictConfig) -> dict[str, Any]:
    cache = open_cache(cfg)
    questions = build_split(cfg.split).load()
    chunk(cfg)
    chunks = load_chunks(cfg)
    mapping = map_gold(questions, load_documents(cfg), chunks)
    doc_of = {c.id: c.doc_id for c in chunks}
    results: dict[str, Any] = {}
    frames: dict[str, pd.DataFrame] = {}
    times = []
    for name, params in variants(cache.scorers).items():
        started = time.perf_counter()
        result = rescore(cache, params)
        times.append(time.perf_counter() - started)
        frame = retrieval_metrics(questions, mapping, result.rankings, doc_of, [8], 10)
        frames[name] = frame
        results[name] = {m: round(float(frame[m].mean()), 4) for m in METRICS} | {"unscored": result.unscored}
    base = frames["hybrid"]
    for name, frame in frames.items():
        if name != "hybrid":
            results[name]["p_vs_hybrid"] = {
                m: round(paired_permutation_tests(frame[m].to_numpy() - base[m].to_numpy())[0].p_value, 4)
                for m in METRICS
            }
    return {
        "questions": len(cache.qids),
        "scored_questions": len(base),
        "scorers": cache.scorers,
        "rescore_p50_s": round(statistics.median(times), 4),
        "rescore_max_s": round(max(times), 4),
        "variants": results,
    }
