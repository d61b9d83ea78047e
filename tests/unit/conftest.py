"""Helpers shared by unit tests: toy chunks from a few texts, and a first stage that returns fixed hits
(registered as retriever kind `test_fixed_hits`, for retrievers that wrap a first stage)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fixgraph.corpus.models import Chunk
from fixgraph.retrieval.base import RETRIEVERS, Hit


def toy_chunks(texts: Mapping[str, str]) -> list[Chunk]:
    """One chunk per text, each its own document; the key is the chunk id, doc id and content hash."""
    return [
        Chunk(
            id=cid,
            doc_id=cid,
            start=0,
            end=len(t),
            text=t,
            title="",
            heading_path=[],
            section="",
            n_tokens=1,
            content_hash=cid,
        )
        for cid, t in texts.items()
    ]


@RETRIEVERS.register("test_fixed_hits")
class FixedHits:
    """A first stage that returns fixed hits, whatever the query."""

    def __init__(self, name: str = "test_fixed_hits", hits: Sequence[Sequence[Any]] = ()) -> None:
        self.name = name
        self.hits = [Hit(str(c), float(s)) for c, s in hits]

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        pass

    def search(self, query: str, k: int) -> list[Hit]:
        return self.hits[:k]
