"""The Retriever interface and the registry behind the `retriever` Hydra group.

A retriever built from config is the same object in the benchmark, the sweep and the API.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from fixgraph.corpus.models import Chunk
from fixgraph.io import read_json, write_json
from fixgraph.registry import Registry


def write_chunk_ids(workdir: Path, chunks: Sequence[Chunk]) -> None:
    """Record which chunks an index was built for (graph indexes hold no copy of the text)."""
    workdir.mkdir(parents=True, exist_ok=True)
    write_json(workdir / "ids.json", [c.id for c in chunks])


def check_chunk_ids(workdir: Path, chunks: Sequence[Chunk]) -> None:
    if read_json(workdir / "ids.json") != [c.id for c in chunks]:
        raise ValueError(f"{workdir}: index was built for other chunks; rebuild it")


def build_first_stage(first_stage: Retriever, chunks: Sequence[Chunk], workdir: Path) -> None:
    """`build` of a retriever that wraps a first stage: the first stage's index under
    workdir/first_stage, and the chunk ids."""
    first_stage.build(chunks, workdir / "first_stage")
    write_chunk_ids(workdir, chunks)


def load_first_stage(first_stage: Retriever, chunks: Sequence[Chunk], workdir: Path) -> None:
    """The counterpart of `build_first_stage`: check the chunk ids, then load the first stage."""
    check_chunk_ids(workdir, chunks)
    first_stage.load(chunks, workdir / "first_stage")


@dataclass(frozen=True)
class Hit:
    chunk_id: str
    score: float


class Retriever(Protocol):
    name: str

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        """Index `chunks` and save whatever `load` needs under `workdir`."""
        ...

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        """Load an index that `build` saved for the same chunks."""
        ...

    def search(self, query: str, k: int) -> list[Hit]: ...


RETRIEVERS: Registry[Retriever] = Registry(
    "retriever",
    [
        f"fixgraph.retrieval.{m}"
        for m in (
            "article_links",
            "bm25",
            "dense",
            "hybrid",
            "link_expansion",
            "ltr",
            "paths",
            "ppr",
            "query_expansion",
            "router",
            "system",
        )
    ],
)


class RecentTraces(OrderedDict[str, Any]):
    """What a retriever's `trace(query)` reads, for the last `size` queries only: it is read right after
    `search`, and a service that answers for months must not keep every query it was asked."""

    def __init__(self, size: int = 256) -> None:
        super().__init__()
        self.size = size

    def __setitem__(self, query: str, trace: Any) -> None:
        super().__setitem__(query, trace)
        self.move_to_end(query)
        while len(self) > self.size:
            self.popitem(last=False)


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k highest scores, best first; ties broken by lower index (deterministic)."""
    k = min(k, scores.shape[0])
    if k <= 0:
        return np.zeros(0, dtype=np.int64)
    candidates = np.argpartition(-scores, k - 1)[:k] if k < scores.shape[0] else np.arange(scores.shape[0])
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order]


def hits_from_scores(scores: np.ndarray, ids: Sequence[str], k: int) -> list[Hit]:
    return [Hit(ids[i], float(scores[i])) for i in top_k(scores, k)]


def build_retriever(cfg: Any) -> Retriever:
    from fixgraph.config import build

    # importing the modules registers their implementations
    from fixgraph.retrieval import (  # noqa: F401
        article_links,
        bm25,
        dense,
        hybrid,
        link_expansion,
        ltr,
        paths,
        ppr,
        query_expansion,
        router,
        system,
    )

    return build(RETRIEVERS, cfg)
