"""Blends: z-normalised weighted sums of scorers, optionally with the first-stage score.

Scores of different models live on different scales (cross-encoder logits, LLM probabilities, RRF
sums), so each is z-normalised over the candidates of one query before weighting:
    blend(d) = sum_s w_s * (x_s(d) - mean_s) / std_s      (std 0 -> the term is 0)
`first_stage` is a reserved weight name for the score the first stage gave each hit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fixgraph.io import stable_hash
from fixgraph.retrieval.base import Hit
from fixgraph.retrieval.rerank import RERANKERS, rerank_top

FIRST_STAGE = "first_stage"


def znorm(values: np.ndarray) -> np.ndarray:
    """(x - mean) / std along the last axis; rows with zero spread become 0."""
    values = np.asarray(values, dtype=np.float64)
    mean = values.mean(axis=-1, keepdims=True)
    std = values.std(axis=-1, keepdims=True)
    return np.where(std > 0, (values - mean) / np.where(std > 0, std, 1.0), 0.0)


def blend_scores(columns: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> np.ndarray:
    """Weighted sum of z-normalised score columns (every column scores the same candidates)."""
    missing = set(weights) - set(columns)
    if missing:
        raise ValueError(f"blend: no scores for {sorted(missing)}; have {sorted(columns)}")
    total = sum(float(w) * znorm(columns[name]) for name, w in weights.items() if w)
    if isinstance(total, int):  # every weight is 0
        return np.zeros(len(next(iter(columns.values()), [])), dtype=np.float64)
    return np.asarray(total)


@RERANKERS.register("blend")
class BlendReranker:
    def __init__(
        self,
        name: str = "blend",
        scorers: Mapping[str, Any] | None = None,
        weights: Mapping[str, float] | None = None,
        top_n: int = 30,
    ) -> None:
        from fixgraph.retrieval.rerank import build_reranker

        self.name = name
        self.top_n = top_n
        self.scorers: dict[str, Any] = {k: build_reranker(cfg) for k, cfg in (scorers or {}).items()}
        self.weights = {str(k): float(v) for k, v in (weights or {}).items()}
        unknown = set(self.weights) - set(self.scorers) - {FIRST_STAGE}
        if unknown or not self.weights:
            valid = sorted([*self.scorers, FIRST_STAGE])
            raise ValueError(f"reranker {name}: weights {sorted(unknown) or '{}'} name no scorer; valid: {valid}")
        for key, scorer in self.scorers.items():
            if not hasattr(scorer, "score"):
                raise ValueError(f"reranker {name}: scorer {key!r} ({scorer.name}) gives no scores")

    def identity(self) -> str:
        return stable_hash({"blend": {k: s.identity() for k, s in self.scorers.items()}, "weights": self.weights})

    def score_columns(self, query: str, passages: Sequence[str]) -> dict[str, np.ndarray]:
        return {k: s.score(query, passages) for k, s in self.scorers.items() if self.weights.get(k)}

    def rerank(self, query: str, hits: Sequence[Hit], texts: Mapping[str, str]) -> list[Hit]:
        head = list(hits[: self.top_n])
        if not head:
            return list(hits)
        columns = self.score_columns(query, [texts[h.chunk_id] for h in head])
        columns[FIRST_STAGE] = np.asarray([h.score for h in head], dtype=np.float64)
        return rerank_top(blend_scores(columns, self.weights), hits, self.top_n)
