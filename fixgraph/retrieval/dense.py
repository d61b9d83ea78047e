"""Dense retrieval over normalised chunk embeddings: exact inner product (default) or a faiss HNSW graph.

Exact search over a few thousand vectors is a single matrix-vector product (well under a millisecond
here); HNSW (`index: hnsw`) is for corpora where that stops being true. `scores()` is always exact,
for the candidate cache and weighted fusion.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fixgraph.corpus.models import Chunk
from fixgraph.embedders.encoders import Embedder, EmbeddingCache, build_embedder
from fixgraph.io import atomic_path, read_json, write_json
from fixgraph.retrieval.base import RETRIEVERS, Hit, hits_from_scores

INDEXES = ("exact", "hnsw")


@RETRIEVERS.register("dense")
class DenseRetriever:
    def __init__(
        self,
        name: str = "dense",
        embedder: Any = None,
        depth: int = 100,
        cache_dir: str | None = None,
        index: str = "exact",
        hnsw: dict[str, int] | None = None,
    ) -> None:
        if embedder is None:
            raise ValueError(f"retriever {name}: needs an `embedder` config")
        if index not in INDEXES:
            raise ValueError(f"retriever {name}: unknown index {index!r}; valid: {', '.join(INDEXES)}")
        self.name = name
        self.depth = depth
        self.index = index
        self.hnsw = {"m": 32, "ef_construction": 200, "ef_search": 128, **(hnsw or {})}
        self.embedder: Embedder = build_embedder(embedder)
        self.cache = EmbeddingCache(Path(cache_dir)) if cache_dir else None
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._ids: list[str] = []
        self._faiss: Any = None
        self.last_timings: dict[str, float] = {}

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        texts = [c.index_text() for c in chunks]
        if self.cache is not None:
            matrix = self.cache.embed(self.embedder, texts)
        else:
            matrix = self.embedder.embed_documents(texts)
        workdir.mkdir(parents=True, exist_ok=True)
        with atomic_path(workdir / "embeddings.npy") as tmp, open(tmp, "wb") as fh:
            np.save(fh, matrix)
        if self.index == "hnsw":
            import faiss

            with atomic_path(workdir / "hnsw.faiss") as tmp:
                faiss.write_index(self._build_hnsw(matrix), str(tmp))
        write_json(workdir / "ids.json", [c.id for c in chunks])
        write_json(workdir / "embedder.json", {"identity": self.embedder.identity()})
        self._matrix, self._ids = matrix, [c.id for c in chunks]

    def _build_hnsw(self, matrix: np.ndarray) -> Any:
        import faiss

        index = faiss.IndexHNSWFlat(matrix.shape[1], int(self.hnsw["m"]), faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = int(self.hnsw["ef_construction"])
        index.add(np.ascontiguousarray(matrix, dtype=np.float32))
        return index

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        self._ids = list(read_json(workdir / "ids.json"))
        if self._ids != [c.id for c in chunks]:
            raise ValueError(f"{workdir}: dense index was built for other chunks; rebuild it")
        if read_json(workdir / "embedder.json")["identity"] != self.embedder.identity():
            raise ValueError(f"{workdir}: dense index was built with another embedder; rebuild it")
        self._matrix = np.load(workdir / "embeddings.npy")
        if self.index == "hnsw":
            import faiss

            self._faiss = faiss.read_index(str(workdir / "hnsw.faiss"))
            self._faiss.hnsw.efSearch = int(self.hnsw["ef_search"])

    def embed_query(self, query: str) -> np.ndarray:
        return self.embedder.embed_queries([query])[0]

    def scores(self, query: str) -> np.ndarray:
        return self._matrix @ self.embed_query(query)

    def search(self, query: str, k: int) -> list[Hit]:
        started = time.perf_counter()
        vector = self.embed_query(query)
        embedded = time.perf_counter()
        if self._faiss is not None:
            k = min(k, len(self._ids))
            distances, indices = self._faiss.search(vector[None, :].astype(np.float32), k)
            hits = [Hit(self._ids[i], float(d)) for d, i in zip(distances[0], indices[0], strict=True) if i >= 0]
        else:
            hits = hits_from_scores(self._matrix @ vector, self._ids, k)
        self.last_timings = {
            "embed_ms": 1000 * (embedded - started),
            "search_ms": 1000 * (time.perf_counter() - embedded),
        }
        return hits
