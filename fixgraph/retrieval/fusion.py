"""Fusion of several ranked lists: reciprocal rank fusion and weighted score fusion.

Both take each channel's ranked hits only (what any retriever returns), so the candidate cache can
replay them exactly from stored lists.
- RRF (Cormack et al. 2009): score(d) = sum_c w_c / (k + rank_c(d)), ranks from 1; absent -> 0.
- Weighted: score(d) = sum_c w_c * norm_c(d), where norm_c z-normalises (or min-max scales) the
  channel's scores over its own list; a document absent from a channel's list gets that list's minimum,
  i.e. "no better than the worst it returned".
Ties are broken by the best rank any channel gave, then by chunk id, so fusion is deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from fixgraph.retrieval.base import Hit

FUSIONS = ("rrf", "weighted")
NORMALIZATIONS = ("zscore", "minmax")


def _finish(scores: dict[str, float], best_rank: dict[str, int], depth: int) -> list[Hit]:
    order = sorted(scores, key=lambda cid: (-scores[cid], best_rank[cid], cid))
    return [Hit(cid, scores[cid]) for cid in order[:depth]]


def _best_ranks(rankings: Mapping[str, Sequence[Hit]]) -> dict[str, int]:
    best: dict[str, int] = {}
    for ranking in rankings.values():
        for rank, hit in enumerate(ranking, start=1):
            best[hit.chunk_id] = min(best.get(hit.chunk_id, rank), rank)
    return best


def rrf(
    rankings: Mapping[str, Sequence[Hit]], k: float, depth: int, weights: Mapping[str, float] | None = None
) -> list[Hit]:
    scores: dict[str, float] = {}
    for channel, ranking in rankings.items():
        weight = 1.0 if weights is None else float(weights.get(channel, 0.0))
        for rank, hit in enumerate(ranking, start=1):
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + weight / (k + rank)
    return _finish(scores, _best_ranks(rankings), depth)


def normalise(values: np.ndarray, method: str) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return values
    if method == "zscore":
        std = values.std()
        return (values - values.mean()) / std if std > 0 else np.zeros_like(values)
    if method == "minmax":
        spread = values.max() - values.min()
        return (values - values.min()) / spread if spread > 0 else np.ones_like(values)
    raise ValueError(f"fusion: unknown normalization {method!r}; valid: {', '.join(NORMALIZATIONS)}")


def weighted(
    rankings: Mapping[str, Sequence[Hit]], weights: Mapping[str, float], depth: int, normalization: str = "zscore"
) -> list[Hit]:
    missing = set(rankings) - set(weights)
    if missing:
        raise ValueError(f"weighted fusion: no weight for channels {sorted(missing)}")
    scores: dict[str, float] = {}
    per_channel: dict[str, tuple[dict[str, float], float]] = {}
    for channel, ranking in rankings.items():
        norm = normalise(np.array([h.score for h in ranking]), normalization)
        per_channel[channel] = (
            {h.chunk_id: float(v) for h, v in zip(ranking, norm, strict=True)},
            float(norm.min()) if norm.size else 0.0,
        )
    best = _best_ranks(rankings)
    for cid in best:
        scores[cid] = sum(float(weights[c]) * values.get(cid, floor) for c, (values, floor) in per_channel.items())
    return _finish(scores, best, depth)
