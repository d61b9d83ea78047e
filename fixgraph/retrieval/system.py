"""A retrieval system: a first stage and an optional reranker, the one object every caller ranks with.

The benchmark, sweep trials (live and replayed from the candidate cache), the locked test, answers
and the API all build a system with `build_system(config)` and rank with `System.search`; a reranker
is attached in exactly one way (a `kind: reranked` system config, which the global `reranker` group
also produces, see `fixgraph.config.system_configs`), so every caller ranks with the same hits.

    hybrid_mpnet:              # conf/retriever/hybrid_mpnet.yaml
      kind: reranked
      first_stage: {kind: hybrid, ...}
      reranker: {kind: bi_encoder, top_n: 30, ...}
      depth: 100               # first-stage candidates handed to the reranker
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fixgraph.corpus.models import Chunk
from fixgraph.retrieval.base import RETRIEVERS, Hit, Retriever, build_retriever
from fixgraph.retrieval.rerank import Reranker, build_reranker


class System:
    """First stage + optional reranker. Also a Retriever (build/load/search), so it nests like one."""

    def __init__(self, name: str, first_stage: Retriever, reranker: Reranker | None = None, depth: int = 100) -> None:
        self.name = name
        self.first_stage = first_stage
        self.reranker = reranker
        self.depth = depth
        self.texts: dict[str, str] = {}
        self.last_timings: dict[str, float] = {}
        # what its index cost: status built|cached, build_seconds, texts_embedded / texts_from_cache of that
        # build, bytes, load_seconds, load_texts_embedded (`open_system` fills it; evaluate reports it)
        self.index_cost: dict[str, Any] = {}

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        self.first_stage.build(chunks, workdir)

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        self.first_stage.load(chunks, workdir)
        self.texts = {c.id: c.index_text() for c in chunks}
        prepare = getattr(self.reranker, "prepare", None)
        if prepare is not None:  # rerankers with per-passage state (vectors) build it once, in batches
            prepare(list(self.texts.values()))

    def candidates(self, query: str, k: int) -> list[Hit]:
        """The first stage's ranking: as deep as the reranker needs, else `k`."""
        return self.first_stage.search(query, max(k, self.depth) if self.reranker is not None else k)

    def search(self, query: str, k: int) -> list[Hit]:
        started = time.perf_counter()
        hits = self.candidates(query, k)
        retrieved = time.perf_counter()
        if self.reranker is not None:
            hits = self.reranker.rerank(query, hits, self.texts)
        self.last_timings = {
            **getattr(self.first_stage, "last_timings", {}),
            "first_stage_ms": 1000 * (retrieved - started),
            "rerank_ms": 1000 * (time.perf_counter() - retrieved),
        }
        return hits[: max(k, 0)]

    def trace(self, query: str) -> dict[str, Any] | None:
        """What a graph first stage linked the query to (its seeds), when it can say."""
        trace = getattr(self.first_stage, "trace", None)
        return trace(query) if trace is not None else None


@RETRIEVERS.register("reranked")
def reranked_system(name: str, first_stage: Mapping[str, Any], reranker: Mapping[str, Any], depth: int = 100) -> System:
    """A system config with a reranker (see the module docstring)."""
    return System(name, build_retriever(first_stage), build_reranker(reranker), int(depth))


def build_system(cfg: Any) -> System:
    """The system of one `systems.<name>` config: a reranked one, or a first stage on its own."""
    built = build_retriever(cfg)
    if isinstance(built, System):
        return built
    return System(str(built.name), built)
