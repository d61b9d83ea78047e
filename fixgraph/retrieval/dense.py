"""Dense retrieval: exact inner-product search over normalised chunk embeddings."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fixgraph.corpus.models import Chunk
from fixgraph.io import atomic_path, read_json, write_json
from fixgraph.retrieval.base import RETRIEVERS, Hit, hits_from_scores
from fixgraph.retrieval.embedders import Embedder, EmbeddingCache, build_embedder


@RETRIEVERS.register("dense")
class DenseRetriever:
    def __init__(
        self,
        name: str = "dense",
        embedder: Any = None,
        depth: int = 100,
        cache_dir: str | None = None,
        **_: Any,
    ) -> None:
        if embedder is None:
            raise ValueError(f"retriever {name}: needs an `embedder` config")
        self.name = name
        self.depth = depth
        self.embedder: Embedder = build_embedder(embedder)
        self.cache = EmbeddingCache(Path(cache_dir)) if cache_dir else None
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._ids: list[str] = []

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        texts = [c.index_text() for c in chunks]
        if self.cache is not None:
            matrix = self.cache.embed(self.embedder, texts)
        else:
            matrix = self.embedder.embed_documents(texts)
        workdir.mkdir(parents=True, exist_ok=True)
        with atomic_path(workdir / "embeddings.npy") as tmp, open(tmp, "wb") as fh:
            np.save(fh, matrix)
        write_json(workdir / "ids.json", [c.id for c in chunks])
        write_json(workdir / "embedder.json", {"identity": self.embedder.identity()})
        self._matrix, self._ids = matrix, [c.id for c in chunks]

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        self._ids = list(read_json(workdir / "ids.json"))
        if self._ids != [c.id for c in chunks]:
            raise ValueError(f"{workdir}: dense index was built for other chunks; rebuild it")
        if read_json(workdir / "embedder.json")["identity"] != self.embedder.identity():
            raise ValueError(f"{workdir}: dense index was built with another embedder; rebuild it")
        self._matrix = np.load(workdir / "embeddings.npy")

    def scores(self, query: str) -> np.ndarray:
        vector = self.embedder.embed_queries([query])[0]
        return self._matrix @ vector

    def search(self, query: str, k: int) -> list[Hit]:
        return hits_from_scores(self.scores(query), self._ids, k)
