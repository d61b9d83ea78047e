"""Dense retrieval over normalised chunk embeddings: exact inner product (default) or a faiss HNSW graph.

Exact search over a few thousand vectors is a single matrix-vector product (well under a millisecond
here); HNSW (`index: hnsw`) is for corpora where that stops being true. `scores()` is always exact,
for the candidate cache and weighted fusion.

Document expansion (`expansion:` the expand stage's file, retrieval/expansion.py) adds LLM-generated
questions per chunk, in one of two ways (`expansion_mode`): `append` embeds chunk text + questions as
one text (which the embedder's max_seq_length may cut), `max` embeds each question on its own and
scores a chunk by the best of its own vector and its questions' (multi-vector max-sim).

`block_weight` w > 0 also embeds each line of a chunk (a paragraph, list item or step, with the
chunk's title and headings as context) and scores a chunk (1 - w) x its own cosine + w x its best
line's: a question about one step of a long chunk matches that step more sharply than the whole
chunk, whose vector averages every step.
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
EXPANSION_MODES = ("append", "max")


def line_texts(chunk: Chunk) -> list[str]:
    """A chunk's lines (blocks: paragraphs, items, steps) other than its title and headings, each with
    the chunk's title and headings as context, as `Chunk.index_text` gives the whole chunk."""
    context = chunk.heading()
    headings = {chunk.title.strip(), *(h.strip() for h in chunk.heading_path)}
    return [f"{context}\n{line.strip()}" for line in chunk.text.split("\n") if line.strip() not in headings | {""}]


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
        expansion: str | None = None,
        expansion_mode: str = "max",
        block_weight: float = 0.0,
    ) -> None:
        if embedder is None:
            raise ValueError(f"retriever {name}: needs an `embedder` config")
        if index not in INDEXES:
            raise ValueError(f"retriever {name}: unknown index {index!r}; valid: {', '.join(INDEXES)}")
        if expansion_mode not in EXPANSION_MODES:
            raise ValueError(
                f"retriever {name}: unknown expansion_mode {expansion_mode!r}; valid: {', '.join(EXPANSION_MODES)}"
            )
        if expansion and expansion_mode == "max" and index != "exact":
            raise ValueError(f"retriever {name}: expansion_mode max needs index: exact")
        if not 0.0 <= block_weight <= 1.0:
            raise ValueError(f"retriever {name}: block_weight must be in [0, 1], got {block_weight}")
        if block_weight > 0 and index != "exact":
            raise ValueError(f"retriever {name}: block_weight > 0 needs index: exact")
        self.block_weight = block_weight
        self.expansion, self.expansion_mode = expansion, expansion_mode
        self.name = name
        self.depth = depth
        self.index = index
        self.hnsw = {"m": 32, "ef_construction": 200, "ef_search": 128, **(hnsw or {})}
        self.embedder: Embedder = build_embedder(embedder)
        self.cache = EmbeddingCache(Path(cache_dir)) if cache_dir else None
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._ids: list[str] = []
        self._faiss: Any = None
        self._owner = np.zeros(0, dtype=np.int64)  # row -> chunk position (max mode: question rows too)
        self._is_line = np.zeros(0, dtype=bool)  # rows that embed one line of a chunk (block_weight)
        self._last_query: tuple[str, np.ndarray] | None = None
        self.last_timings: dict[str, float] = {}

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.cache is not None:
            return self.cache.embed(self.embedder, texts)
        return self.embedder.embed_documents(texts)

    def _rows(self, chunks: Sequence[Chunk]) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The texts to embed, per text the position of the chunk it stands for, and which are lines."""
        texts = [c.index_text() for c in chunks]
        owner = list(range(len(chunks)))
        if self.expansion:
            from fixgraph.retrieval.expansion import expanded_text, load_expansion

            questions = load_expansion(self.expansion, chunks, self.name)
            if self.expansion_mode == "append":
                texts = [expanded_text(t, questions[c.id]) for t, c in zip(texts, chunks, strict=True)]
            else:
                for i, c in enumerate(chunks):
                    texts += questions[c.id]
                    owner += [i] * len(questions[c.id])
        is_line = [False] * len(texts)
        if self.block_weight > 0:
            for i, c in enumerate(chunks):
                lines = line_texts(c)
                texts += lines
                owner += [i] * len(lines)
                is_line += [True] * len(lines)
        return texts, np.asarray(owner, dtype=np.int64), np.asarray(is_line, dtype=bool)

    def vectors(self, chunks: Sequence[Chunk]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The index's rows for `chunks`: each row's vector, the position of its chunk, and whether it is a
        line (what `build` stores; the query-encoder trainer scores questions against them)."""
        texts, owner, is_line = self._rows(chunks)
        return self._embed(texts), owner, is_line

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        matrix, owner, is_line = self.vectors(chunks)
        workdir.mkdir(parents=True, exist_ok=True)
        with atomic_path(workdir / "embeddings.npy") as tmp, open(tmp, "wb") as fh:
            np.save(fh, matrix)
        with atomic_path(workdir / "owners.npy") as tmp, open(tmp, "wb") as fh:
            np.save(fh, owner)
        with atomic_path(workdir / "lines.npy") as tmp, open(tmp, "wb") as fh:
            np.save(fh, is_line)
        if self.index == "hnsw":
            import faiss

            with atomic_path(workdir / "hnsw.faiss") as tmp:
                faiss.write_index(self._build_hnsw(matrix), str(tmp))
        write_json(workdir / "ids.json", [c.id for c in chunks])
        write_json(workdir / "embedder.json", {"identity": self.embedder.identity()})
        self._matrix, self._ids, self._owner, self._is_line = matrix, [c.id for c in chunks], owner, is_line

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
        owners = workdir / "owners.npy"  # absent in indexes built before document expansion: one row per chunk
        self._owner = np.load(owners) if owners.exists() else np.arange(len(self._ids), dtype=np.int64)
        lines = workdir / "lines.npy"  # absent in indexes built before block_weight: no line rows
        self._is_line = np.load(lines) if lines.exists() else np.zeros(len(self._owner), dtype=bool)
        if self.index == "hnsw":
            import faiss

            self._faiss = faiss.read_index(str(workdir / "hnsw.faiss"))
            self._faiss.hnsw.efSearch = int(self.hnsw["ef_search"])

    def embed_query(self, query: str) -> np.ndarray:
        # the last query's vector is kept: a layer on top (link expansion) asks again for the same query
        if self._last_query is None or self._last_query[0] != query:
            self._last_query = (query, self.embedder.embed_queries([query])[0])
        return self._last_query[1]

    def own_and_line(self, vector: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per chunk, in index order: the best cosine of its own rows (its vector, its expansion questions:
        max-sim) and of its lines (its own score where it has no line rows)."""
        rows = self._matrix @ vector
        if len(rows) == len(self._ids):
            return rows, rows
        own = ~self._is_line
        best = np.full(len(self._ids), -np.inf, dtype=rows.dtype)
        np.maximum.at(best, self._owner[own], rows[own])
        line = np.full(len(self._ids), -np.inf, dtype=rows.dtype)
        np.maximum.at(line, self._owner[self._is_line], rows[self._is_line])
        return best, np.where(np.isfinite(line), line, best)  # a chunk of headings only has no line

    def blend(self, own: np.ndarray, line: np.ndarray) -> np.ndarray:
        """The chunk scores from `own_and_line`'s two arrays: (1 - block_weight) x own + block_weight x line."""
        return own if self.block_weight == 0 else (1 - self.block_weight) * own + self.block_weight * line

    def _chunk_scores(self, vector: np.ndarray) -> np.ndarray:
        return self.blend(*self.own_and_line(vector))

    def scores(self, query: str) -> np.ndarray:
        return self._chunk_scores(self.embed_query(query))

    def search(self, query: str, k: int) -> list[Hit]:
        started = time.perf_counter()
        vector = self.embed_query(query)
        embedded = time.perf_counter()
        if self._faiss is not None:
            k = min(k, len(self._ids))
            distances, indices = self._faiss.search(vector[None, :].astype(np.float32), k)
            hits = [Hit(self._ids[i], float(d)) for d, i in zip(distances[0], indices[0], strict=True) if i >= 0]
        else:
            hits = hits_from_scores(self._chunk_scores(vector), self._ids, k)
        self.last_timings = {
            "embed_ms": 1000 * (embedded - started),
            "search_ms": 1000 * (time.perf_counter() - embedded),
        }
        return hits
