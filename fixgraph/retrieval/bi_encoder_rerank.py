"""A bi-encoder reranker: cosine of the query with each candidate under a (stronger) embedder.

Candidate vectors are embedded once, in batches, when the reranked retriever loads (`prepare`), through
the embedding cache the dense indexes share (same text hash, same embedder identity); reranking 30
candidates then costs one query embedding and a 30 x d product. A candidate not seen at load time is
embedded on first use and added. This is how a second, larger embedder
(mpnet) reorders a cheap first stage without a cross-encoder's per-pair forward passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fixgraph.embedders.encoders import Embedder, EmbeddingCache, build_embedder
from fixgraph.io import sha256_text, stable_hash
from fixgraph.retrieval.rerank import RERANKERS, ScorerReranker


@RERANKERS.register("bi_encoder")
class BiEncoderReranker(ScorerReranker):
    def __init__(
        self,
        name: str = "bi_encoder",
        embedder: Any = None,
        cache_dir: str | None = None,
        top_n: int = 30,
    ) -> None:
        if embedder is None:
            raise ValueError(f"reranker {name}: needs an `embedder` config")
        self.name = name
        self.top_n = top_n
        self.embedder: Embedder = build_embedder(embedder)
        self.cache = EmbeddingCache(Path(cache_dir)) if cache_dir else None
        self._vectors: dict[str, np.ndarray] = {}

    def identity(self) -> str:
        return stable_hash({"kind": "bi_encoder", "embedder": self.embedder.identity()})

    def prepare(self, texts: Sequence[str]) -> None:
        """Embed every candidate text up front, in batches (the reranked retriever calls this on load)."""
        vectors = self.cache.embed(self.embedder, texts) if self.cache else self.embedder.embed_documents(texts)
        self._vectors.update({sha256_text(t): v for t, v in zip(texts, vectors, strict=True)})

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        if not passages:
            return np.zeros(0, dtype=np.float32)
        keys = [sha256_text(p) for p in passages]
        if not self._vectors and self.cache is not None:
            self._vectors = self.cache.load(self.embedder)
        missing = [p for k, p in zip(keys, passages, strict=True) if k not in self._vectors]
        if missing:
            vectors = self.cache.embed(self.embedder, missing) if self.cache else self.embedder.embed_documents(missing)
            self._vectors.update({sha256_text(p): v for p, v in zip(missing, vectors, strict=True)})
        matrix = np.stack([self._vectors[k] for k in keys])
        return np.asarray(matrix @ self.embedder.embed_queries([query])[0], dtype=np.float32)
