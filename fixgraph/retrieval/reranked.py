"""A first stage followed by a reranker, as one retriever (`kind: reranked`).

With reranking as a system, one evaluation holds both `hybrid` and `hybrid + cross-encoder` over the
same questions, so their difference gets a paired test; the global `reranker` group still applies one
reranker to every system when that is what a run wants.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fixgraph.corpus.models import Chunk
from fixgraph.retrieval.base import RETRIEVERS, Hit, Retriever


@RETRIEVERS.register("reranked")
class RerankedRetriever:
    def __init__(
        self, name: str = "reranked", first_stage: Any = None, reranker: Any = None, depth: int = 100, **_: Any
    ) -> None:
        from fixgraph.retrieval.base import build_retriever
        from fixgraph.retrieval.rerank import Reranker, build_reranker

        if first_stage is None or reranker is None:
            raise ValueError(f"retriever {name}: needs `first_stage` (a retriever) and `reranker` configs")
        self.name = name
        self.depth = depth
        self.first_stage: Retriever = build_retriever(first_stage)
        self.reranker: Reranker = build_reranker(reranker)
        self._texts: dict[str, str] = {}
        self.last_timings: dict[str, float] = {}

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        self.first_stage.build(chunks, workdir / "first_stage")

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        self.first_stage.load(chunks, workdir / "first_stage")
        self._texts = {c.id: c.index_text() for c in chunks}
        prepare = getattr(self.reranker, "prepare", None)
        if prepare is not None:  # rerankers with per-passage state (vectors) build it once, in batches
            prepare(list(self._texts.values()))

    def search(self, query: str, k: int) -> list[Hit]:
        started = time.perf_counter()
        hits = self.first_stage.search(query, max(k, self.depth))
        retrieved = time.perf_counter()
        reranked = self.reranker.rerank(query, hits, self._texts)[:k]
        inner = getattr(self.first_stage, "last_timings", {})
        self.last_timings = {
            **inner,
            "first_stage_ms": 1000 * (retrieved - started),
            "rerank_ms": 1000 * (time.perf_counter() - retrieved),
        }
        return reranked
