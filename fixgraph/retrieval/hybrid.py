"""Hybrid retrieval: several channels fused by reciprocal rank fusion or weighted score fusion (fusion.py)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fixgraph.corpus.models import Chunk
from fixgraph.retrieval.base import RETRIEVERS, Hit, Retriever
from fixgraph.retrieval.fusion import FUSIONS, rrf, weighted


def reciprocal_rank_fusion(rankings: Sequence[Sequence[Hit]], k: float, depth: int) -> list[Hit]:
    """Unweighted RRF of anonymous rankings (see fusion.rrf)."""
    return rrf({str(i): list(r) for i, r in enumerate(rankings)}, k, depth)


@RETRIEVERS.register("hybrid")
class HybridRetriever:
    def __init__(
        self,
        name: str = "hybrid",
        channels: Mapping[str, Any] | None = None,
        fusion: str = "rrf",
        rrf_k: float = 60,
        depth: int = 100,
        weights: Mapping[str, float] | None = None,
        normalization: str = "zscore",
    ) -> None:
        from fixgraph.retrieval.base import build_retriever

        if fusion not in FUSIONS:
            raise ValueError(f"retriever {name}: unknown fusion {fusion!r}; valid: {', '.join(FUSIONS)}")
        if not channels:
            raise ValueError(f"retriever {name}: needs at least one channel")
        self.name = name
        self.fusion = fusion
        self.rrf_k = rrf_k
        self.depth = depth
        self.normalization = normalization
        self.weights = {str(k): float(v) for k, v in (weights or {}).items()} or None
        self.channels: dict[str, Retriever] = {key: build_retriever(cfg) for key, cfg in channels.items()}
        if self.weights is not None and set(self.weights) != set(self.channels):
            raise ValueError(
                f"retriever {name}: weights {sorted(self.weights)} must name channels {sorted(self.channels)}"
            )
        if fusion == "weighted" and self.weights is None:
            raise ValueError(f"retriever {name}: weighted fusion needs `weights` per channel")
        self.last_timings: dict[str, float] = {}

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        for key, channel in self.channels.items():
            channel.build(chunks, workdir / key)

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        for key, channel in self.channels.items():
            channel.load(chunks, workdir / key)

    def channel_rankings(self, query: str) -> dict[str, list[Hit]]:
        rankings: dict[str, list[Hit]] = {}
        self.last_timings = {}
        for key, channel in self.channels.items():
            started = time.perf_counter()
            rankings[key] = channel.search(query, self.depth)
            self.last_timings[f"{key}_ms"] = 1000 * (time.perf_counter() - started)
        return rankings

    def fuse(self, rankings: Mapping[str, Sequence[Hit]], k: int) -> list[Hit]:
        if self.fusion == "weighted":
            assert self.weights is not None
            return weighted(rankings, self.weights, max(k, 0), self.normalization)
        return rrf(rankings, self.rrf_k, max(k, 0), self.weights)

    def search(self, query: str, k: int) -> list[Hit]:
        rankings = self.channel_rankings(query)
        started = time.perf_counter()
        fused = self.fuse(rankings, k)
        self.last_timings["fusion_ms"] = 1000 * (time.perf_counter() - started)
        return fused
