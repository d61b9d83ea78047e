"""Re-score a candidate cache with new fusion and reranking parameters, without running any model.

    cache = open_cache(cfg)                       # fixgraph.pipeline.candidates; raises if stale
    result = rescore(cache, RescoreParams(rrf_k=20, rerank_top_n=30, rerank_weights={"cross_encoder": 1}))
    result.rankings["ga-002"]                    # list[Hit], best first

Fusion replays the same functions the live HybridRetriever uses (fusion.py) on the stored lists, and
reranking the same z-normalised blend as BlendReranker, so a cached run equals a live one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from fixgraph.pipeline.candidate_cache import CandidateCache
from fixgraph.retrieval.base import Hit
from fixgraph.retrieval.blend import FIRST_STAGE, znorm
from fixgraph.retrieval.fusion import rrf, weighted
from fixgraph.retrieval.rerank import rerank_top


@dataclass(frozen=True)
class RescoreParams:
    fusion: str = "rrf"  # rrf | weighted | the name of one channel (no fusion)
    rrf_k: float = 60.0
    channel_weights: Mapping[str, float] | None = None  # rrf: optional per-channel weights; weighted: required
    normalization: str = "zscore"
    rerank_top_n: int = 0  # 0: no reranking
    rerank_weights: Mapping[str, float] = field(default_factory=dict)  # scorer name | first_stage -> weight
    k: int = 100


@dataclass
class RescoreResult:
    rankings: dict[str, list[Hit]]
    unscored: int  # reranked candidates that the cache holds no score for (ranked after scored ones)


def first_stage(cache: CandidateCache, qid: str, params: RescoreParams) -> list[Hit]:
    lists = cache.lists[qid]
    if params.fusion == "rrf":
        return rrf(lists, params.rrf_k, params.k, params.channel_weights)
    if params.fusion == "weighted":
        if not params.channel_weights:
            raise ValueError("rescore: weighted fusion needs channel_weights")
        return weighted(lists, params.channel_weights, params.k, params.normalization)
    if params.fusion in lists:
        return list(lists[params.fusion][: params.k])
    raise ValueError(f"rescore: unknown fusion {params.fusion!r}; valid: rrf, weighted, {', '.join(lists)}")


def rerank_from_cache(cache: CandidateCache, qid: str, hits: list[Hit], params: RescoreParams) -> tuple[list[Hit], int]:
    head = hits[: params.rerank_top_n]
    if not head or not params.rerank_weights:
        return hits, 0
    unknown = set(params.rerank_weights) - {*cache.scorers, FIRST_STAGE}
    if unknown:
        raise ValueError(f"rescore: no cached scorer {sorted(unknown)}; cached: {cache.scorers}")
    stored = cache.scores.get(qid, {})
    columns: dict[str, np.ndarray] = {FIRST_STAGE: np.array([h.score for h in head], dtype=np.float64)}
    for name in cache.scorers:
        if params.rerank_weights.get(name):
            columns[name] = np.array([stored.get(h.chunk_id, {}).get(name, np.nan) for h in head], dtype=np.float64)
    missing = np.zeros(len(head), dtype=bool)
    for values in columns.values():
        missing |= np.isnan(values)
    total = np.zeros(len(head), dtype=np.float64)
    if (~missing).any():
        for name, weight in params.rerank_weights.items():
            if weight:
                total[~missing] += float(weight) * znorm(columns[name][~missing])
    total[missing] = -np.inf  # no score: below every scored candidate, in first-stage order
    return rerank_top(total, hits, params.rerank_top_n), int(missing.sum())


def rescore(cache: CandidateCache, params: RescoreParams) -> RescoreResult:
    rankings: dict[str, list[Hit]] = {}
    unscored = 0
    for qid in cache.qids:
        hits, missing = rerank_from_cache(cache, qid, first_stage(cache, qid, params), params)
        rankings[qid] = hits[: params.k]
        unscored += missing
    return RescoreResult(rankings, unscored)
