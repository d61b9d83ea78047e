"""Incremental chunking: documents whose rendered content did not change are not chunked again.

The cache is one parquet file per (corpus, chunker config + code) under `chunker.cache_dir`, holding
the chunks of every document of the last run with the key of the document content they came from.
A run chunks only documents whose key is new (added or edited), reuses the rows of the others (so
unchanged documents keep their chunk ids and offsets by construction) and drops removed documents'
rows. Outside DVC's output folders on purpose: `dvc repro` deletes a stage's outputs before running it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from fixgraph.corpus.chunking import Chunker
from fixgraph.corpus.models import Chunk, Document
from fixgraph.corpus.store import CHUNK_COLUMNS
from fixgraph.io import atomic_path, stable_hash


def document_key(doc: Document) -> str:
    """Hash of everything a chunker reads from a document (not its links or metadata)."""
    return stable_hash(doc.model_dump(mode="json", include={"id", "title", "text", "blocks", "sections"}))


@dataclass
class IncrementalStats:
    documents: int = 0
    rechunked: int = 0  # added + edited
    reused: int = 0
    added: int = 0
    edited: int = 0
    removed: int = 0  # in the last run, gone now

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class ChunkCache:
    def __init__(self, path: Path | None) -> None:
        self.path = path

    def load(self) -> dict[str, list[Chunk]]:
        """document key -> its chunks, from the last run (empty when there was none)."""
        if self.path is None or not self.path.exists():
            return {}
        frame = pd.read_parquet(self.path)
        cached: dict[str, list[Chunk]] = {}
        for row in frame.to_dict(orient="records"):
            key = str(row.pop("doc_key"))
            chunk = Chunk.model_validate({**row, "heading_path": list(row["heading_path"])})
            cached.setdefault(key, []).append(chunk)
        return cached

    def save(self, chunks_by_key: dict[str, list[Chunk]]) -> None:
        if self.path is None:
            return
        rows = [{**c.model_dump(), "doc_key": key} for key, chunks in chunks_by_key.items() for c in chunks]
        frame = pd.DataFrame(rows, columns=[*CHUNK_COLUMNS, "doc_key"])
        with atomic_path(self.path) as tmp:
            frame.to_parquet(tmp, index=False)


def chunk_incrementally(
    chunker: Chunker, docs: Sequence[Document], cache: ChunkCache
) -> tuple[list[Chunk], IncrementalStats]:
    """Chunks of `docs` in document order, chunking only documents the cache does not hold."""
    cached = cache.load()
    cached_ids = {c.doc_id for doc_chunks in cached.values() for c in doc_chunks}
    stats = IncrementalStats(documents=len(docs))
    current: dict[str, list[Chunk]] = {}
    chunks: list[Chunk] = []
    for doc in docs:
        key = document_key(doc)
        if key in cached:
            stats.reused += 1
            doc_chunks = cached[key]
        else:
            stats.rechunked += 1
            if doc.id in cached_ids:
                stats.edited += 1
            else:
                stats.added += 1
            doc_chunks = chunker.chunk(doc)
        current[key] = doc_chunks
        chunks.extend(doc_chunks)
    stats.removed = len(cached_ids - {d.id for d in docs})
    ids = [c.id for c in chunks]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise ValueError(f"chunker produced duplicate chunk ids: {dupes[:5]}")
    cache.save(current)
    return chunks, stats
