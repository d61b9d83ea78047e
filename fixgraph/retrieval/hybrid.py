"""Hybrid retrieval: reciprocal rank fusion (Cormack et al. 2009) of several channels."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fixgraph.corpus.models import Chunk
from fixgraph.retrieval.base import RETRIEVERS, Hit, Retriever


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Hit]], k: float, depth: int) -> list[Hit]:
    """score(d) = sum over rankings of 1 / (k + rank(d)), ranks from 1.

    Ties are broken by the best rank any channel gave, then by chunk id, so fusion is deterministic.
    """
    scores: dict[str, float] = {}
    best_rank: dict[str, int] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, start=1):
            scores[hit.chunk_id] = scores.get(hit.chunk_id, 0.0) + 1.0 / (k + rank)
            best_rank[hit.chunk_id] = min(best_rank.get(hit.chunk_id, rank), rank)
    order = sorted(scores, key=lambda cid: (-scores[cid], best_rank[cid], cid))
    return [Hit(cid, scores[cid]) for cid in order[:depth]]


@RETRIEVERS.register("hybrid")
class HybridRetriever:
    def __init__(
        self,
        name: str = "hybrid",
        channels: Mapping[str, Any] | None = None,
        fusion: str = "rrf",
        rrf_k: float = 60,
        depth: int = 100,
        **_: Any,
    ) -> None:
        from fixgraph.retrieval.base import build_retriever

        if fusion != "rrf":
            raise ValueError(f"retriever {name}: unknown fusion {fusion!r}; valid: rrf")
        if not channels:
            raise ValueError(f"retriever {name}: needs at least one channel")
        self.name = name
        self.rrf_k = rrf_k
        self.depth = depth
        self.channels: dict[str, Retriever] = {key: build_retriever(cfg) for key, cfg in channels.items()}

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        for key, channel in self.channels.items():
            channel.build(chunks, workdir / key)

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        for key, channel in self.channels.items():
            channel.load(chunks, workdir / key)

    def search(self, query: str, k: int) -> list[Hit]:
        rankings = [channel.search(query, self.depth) for channel in self.channels.values()]
        return reciprocal_rank_fusion(rankings, self.rrf_k, max(k, 0))
