"""Per-query latency of every retrieval stage on the split's questions, and cache re-scoring time.

Prints medians (p50) and p95 in ms per query for BM25 (bm25s, and Lucene timed last), dense (exact and
HNSW; the onnx int8 query path against torch fp32 and against sentence-transformers' `encode`), hybrid
(RRF), hybrid + a reranker over the top 30 (the cross-encoder in torch fp32 and int8 and in onnx fp32 and int8;
the 2-layer cross-encoder in onnx fp32 and int8; the mpnet bi-encoder), the bm25s / pyserini
queries-per-second ratio measured in the same run, and the time to re-score every question from the
candidate cache. Targets (issue 4, 2-core CPU): BM25 and dense < 10 ms, hybrid < 20 ms, hybrid +
rerank@30 <= 250 ms, cache re-scoring < 1 s.

Options (Hydra overrides): +bench.rerank_questions=N (default 40: the reranker is the slow part),
+bench.skip=[lucene,rerank,small,mpnet,cache] (`small`: the 2-layer cross-encoder, trained by
`fixgraph train-reranker trainer=cross_encoder_small`; `mpnet`: the bi-encoder reranker, `make models-stock`).
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from omegaconf import DictConfig

from fixgraph.bench import options
from fixgraph.evaluation.splits import build_split
from fixgraph.pipeline.stages import chunk, load_chunks, open_system

# the peer for the ONNX int8 query path: the same model through torch in fp32
TORCH_QUERIES = ("embedder.query_backend=torch", "embedder.query_quantize=false")


WARMUP = 10  # untimed queries first: with one, the first system timed paid ~2.5 ms per query more than
# the same session did later in the run


def timed(fn: Callable[[str], Any], queries: Sequence[str]) -> dict[str, float]:
    for query in queries[:WARMUP]:  # model load, JIT, and onnxruntime's buffers for a range of input lengths
        fn(query)
    times = []
    for query in queries:
        started = time.perf_counter()
        fn(query)
        times.append(1000 * (time.perf_counter() - started))
    return {
        "p50_ms": round(statistics.median(times), 3),
        "p95_ms": round(float(np.percentile(times, 95)), 3),
        "queries": len(times),
    }


def system_cfg(cfg: DictConfig, option: str, extra: Sequence[str] = (), **overrides: Any) -> DictConfig:
    """The retriever `option` composed as the runner would; `extra` are global overrides (e.g. embedder.*)."""
    from fixgraph.config import compose

    base = [f"paths.artifacts={cfg.paths.artifacts}", f"corpus={cfg.corpus.name}", *extra]
    composed = compose([*base, f"retriever={option}", *(f"retriever.{k}={v}" for k, v in overrides.items())])
    node = composed.retriever
    assert isinstance(node, DictConfig)
    return node


def run(cfg: DictConfig) -> dict[str, Any]:
    knobs = options(cfg)
    skip = set(knobs.get("skip", []))
    questions = [q.question for q in build_split(cfg.split).load()]
    chunk(cfg)
    chunks = load_chunks(cfg)
    out: dict[str, Any] = {
        "corpus": str(cfg.corpus.name),
        "chunks": len(chunks),
        "questions": len(questions),
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "systems": {},
    }
    systems = out["systems"]
    depth = int(cfg.evaluation.depth)

    def measure(
        name: str, option: str, queries: Sequence[str] = questions, extra: Sequence[str] = (), **overrides: Any
    ) -> Any:
        retriever = open_system(cfg, f"bench-{name}", system_cfg(cfg, option, extra, **overrides), chunks)
        systems[name] = timed(lambda q: retriever.search(q, depth), queries)
        return retriever

    measure("bm25", "bm25")
    dense = measure("dense", "dense")
    measure("dense_torch_fp32_query", "dense", extra=TORCH_QUERIES)
    measure("dense_hnsw", "dense_hnsw")
    dense = dense.first_stage
    model = dense.embedder.model
    systems["dense_query_embedding"] = timed(lambda q: dense.embed_query(q), questions)
    systems["sentence_transformers_encode"] = timed(
        lambda q: model.encode([q], normalize_embeddings=True, show_progress_bar=False), questions
    )
    out["embedding_speedup_vs_encode"] = round(
        systems["sentence_transformers_encode"]["p50_ms"] / systems["dense_query_embedding"]["p50_ms"], 3
    )
    out["dense_speedup_vs_torch_fp32_query"] = round(
        systems["dense_torch_fp32_query"]["p50_ms"] / systems["dense"]["p50_ms"], 3
    )
    measure("hybrid", "hybrid")
    if "rerank" not in skip:
        subset = questions[: int(knobs.get("rerank_questions", 40))]
        measure("hybrid_ce", "hybrid_ce", subset)
        measure("hybrid_ce_onnx", "hybrid_ce", subset, **{"reranker.backend": "onnx"})
        measure("hybrid_ce_int8", "hybrid_ce_int8", subset)
        measure("hybrid_ce_onnx_int8", "hybrid_ce", subset, **{"reranker.backend": "onnx", "reranker.quantize": "true"})
        if "small" not in skip:
            measure("hybrid_ce_small", "hybrid_ce_small", subset)
            measure("hybrid_ce_small_int8", "hybrid_ce_small", subset, **{"reranker.quantize": "true"})
        if "mpnet" not in skip:
            measure("hybrid_mpnet", "hybrid_mpnet", subset)
        out["rerank_onnx_speedup_vs_torch"] = round(
            systems["hybrid_ce"]["p50_ms"] / systems["hybrid_ce_onnx"]["p50_ms"], 3
        )
    # last, so that the JVM (its JIT and collector run on after its queries) cannot slow the systems timed after it
    if "lucene" not in skip:
        measure("bm25_lucene", "bm25_lucene")
        ratio = systems["bm25_lucene"]["p50_ms"] / systems["bm25"]["p50_ms"]
        out["bm25s_vs_pyserini"] = {
            "bm25s_qps": round(1000 / systems["bm25"]["p50_ms"], 1),
            "pyserini_qps": round(1000 / systems["bm25_lucene"]["p50_ms"], 1),
            "bm25s_speedup": round(ratio, 3),
        }
    if "cache" not in skip:
        out["cache_rescoring"] = cache_rescoring(cfg)
    out["targets_met"] = {
        "bm25_under_10ms": systems["bm25"]["p50_ms"] < 10,
        "dense_under_10ms": systems["dense"]["p50_ms"] < 10,
        "hybrid_under_20ms": systems["hybrid"]["p50_ms"] < 20,
        **(
            {
                "hybrid_rerank30_under_250ms": {
                    name: systems[name]["p50_ms"] <= 250
                    for name in systems
                    if name.startswith(("hybrid_ce", "hybrid_mpnet"))
                }
            }
            if "hybrid_ce" in systems
            else {}
        ),
        **(
            {"cache_rescore_under_1s": out["cache_rescoring"]["rerank_p50_s"] < 1}
            if "rerank_p50_s" in out.get("cache_rescoring", {})
            else {}
        ),
    }
    return out


def cache_rescoring(cfg: DictConfig) -> dict[str, Any]:
    """Time to replay every question of the split from the candidate cache: hybrid (fusion only) and
    hybrid + mpnet rerank of 30, each after one pass that records whatever the cache still lacked."""
    from fixgraph.evaluation.splits import build_split
    from fixgraph.modelpaths import ModelNotFoundError
    from fixgraph.pipeline.candidates import CandidateStore, Replayer, replay_rankings

    questions = build_split(cfg.split).load()
    replayer = Replayer(cfg, load_chunks(cfg), CandidateStore.of(cfg))
    depth = int(cfg.evaluation.depth)
    out: dict[str, Any] = {"questions": len(questions)}
    for label, option in (("fusion", "hybrid"), ("rerank", "hybrid_mpnet")):
        node = system_cfg(cfg, option)
        try:
            replay_rankings(replayer, node, questions, depth)  # records what is missing
        except ModelNotFoundError as exc:
            out[f"{label}_skipped"] = str(exc)
            continue
        times = []
        for _ in range(5):
            started = time.perf_counter()
            _, stats = replay_rankings(replayer, node, questions, depth)
            times.append(time.perf_counter() - started)
        out[f"{label}_p50_s"] = round(statistics.median(times), 4)
        out[f"{label}_scoring_path"] = stats.path
    return out
