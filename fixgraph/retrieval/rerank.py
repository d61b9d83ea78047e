"""The `reranker` registry: second-stage scorers applied to a first stage's candidates.

Every reranker is a `Scorer` (query + candidate texts -> one score each) wrapped by `rerank_top`, which
re-sorts only the first `top_n` hits (the rest keep their first-stage order below them): reranking
cost is bounded by `top_n`, and blends and the candidate cache reuse the raw scores.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from fixgraph.registry import Registry
from fixgraph.retrieval.base import Hit


class Reranker(Protocol):
    name: str

    def rerank(self, query: str, hits: Sequence[Hit], texts: Mapping[str, str]) -> list[Hit]:
        """Reorder `hits` for `query`; `texts` maps chunk id -> the text to score."""
        ...


class Scorer(Protocol):
    name: str

    def identity(self) -> str:
        """Changes whenever the scores for the same inputs could change (model, length, prompt...)."""
        ...

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """One relevance score per passage, higher is better (any scale)."""
        ...


RERANKERS: Registry[Reranker] = Registry(
    "reranker", [f"fixgraph.retrieval.{m}" for m in ("bi_encoder_rerank", "blend", "cross_encoder", "llm_rerank")]
)


# how far below the last reranked hit the first unscored hit is placed
TAIL_GAP = 1e-6


def rerank_top(scores: np.ndarray, hits: Sequence[Hit], top_n: int) -> list[Hit]:
    """Sort the first `top_n` hits by `scores` (one per those hits), ties by first-stage rank.

    The rest keep their first-stage order and score gaps, shifted to sit just below the reranked head:
    the reranker's scale (a z-blend, a probability, a logit) differs from the first stage's, and a stage
    that adds to scores afterwards (link expansion, weighted fusion) must not lift an unscored hit over
    a scored one by that difference of scale alone.
    """
    head = list(hits[:top_n])
    order = sorted(range(len(head)), key=lambda i: (-float(scores[i]), i))
    ranked = [Hit(head[i].chunk_id, float(scores[i])) for i in order]
    tail = list(hits[top_n:])
    if not ranked or not tail:
        return ranked + tail
    shift = ranked[-1].score - tail[0].score - TAIL_GAP
    return ranked + [Hit(h.chunk_id, h.score + shift) for h in tail]


def rerank_by(scorer: Scorer, query: str, hits: Sequence[Hit], texts: Mapping[str, str], top_n: int) -> list[Hit]:
    """Score the top `top_n` hits with `scorer` and re-sort them (what every scorer reranker does)."""
    head = hits[:top_n]
    if not head:
        return list(hits)
    return rerank_top(scorer.score(query, [texts[h.chunk_id] for h in head]), hits, top_n)


class ScorerReranker:
    """Base for rerankers that are scorers: `rerank` scores the top `top_n` hits and re-sorts them."""

    name: str
    top_n: int

    def identity(self) -> str:  # pragma: no cover - overridden
        raise NotImplementedError

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def rerank(self, query: str, hits: Sequence[Hit], texts: Mapping[str, str]) -> list[Hit]:
        return rerank_by(self, query, hits, texts, self.top_n)


class RerankWith:
    """A scorer reranker with its scorer swapped (the candidate cache replays recorded scores this way)."""

    def __init__(self, name: str, scorer: Scorer, top_n: int) -> None:
        self.name = name
        self.scorer = scorer
        self.top_n = top_n

    def rerank(self, query: str, hits: Sequence[Hit], texts: Mapping[str, str]) -> list[Hit]:
        return rerank_by(self.scorer, query, hits, texts, self.top_n)


@RERANKERS.register("none")
class NoReranker:
    """Keeps the first-stage order: the baseline every reranker is compared with."""

    def __init__(self, name: str = "none") -> None:
        self.name = name

    def rerank(self, query: str, hits: Sequence[Hit], texts: Mapping[str, str]) -> list[Hit]:
        return list(hits)


def build_reranker(cfg: Any, **extra: Any) -> Reranker:
    from fixgraph.config import build

    # importing the modules registers their implementations
    from fixgraph.retrieval import bi_encoder_rerank, blend, cross_encoder, llm_rerank  # noqa: F401

    return build(RERANKERS, cfg, **extra)
