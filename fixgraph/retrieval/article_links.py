"""Retrieval over the corpus link graph: documents as nodes, joined by their guide, see-also and
inline links (derived from `Document.links`).

- `article_links`: a first-stage retriever (`first_stage`, any retriever config) seeds documents with the reciprocal
  ranks of their chunks; PPR over the document graph spreads that to linked pages; a chunk scores
  (1 - `mix`) x its min-max first-stage score + `mix` x its page's min-max PPR score. Chunks of pages
  reached only through links join the candidates.
- `link_prior`: keeps the first stage's top `rerank_depth` hits and only reorders them: a hit gains
  `weight` x (first-stage score of the other top pages it links to or is linked from) / (their total),
  so pages the other strong hits point at move up. It adds no new candidates.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fixgraph.corpus.models import Chunk, Document
from fixgraph.corpus.store import read_documents
from fixgraph.retrieval.base import (
    RETRIEVERS,
    Hit,
    RecentTraces,
    build_first_stage,
    build_retriever,
    load_first_stage,
)
from fixgraph.retrieval.ppr import min_max, personalized_pagerank

DEFAULT_LINK_WEIGHTS = {"guide": 0.5, "seealso": 1.0, "inline": 1.0, "next": 0.5}


def document_link_graph(documents: Sequence[Document], link_weights: Mapping[str, float]) -> Any:
    """Undirected igraph.Graph over documents; parallel links add their weights."""
    import igraph as ig

    ids = [d.id for d in documents]
    index = {d: i for i, d in enumerate(ids)}
    weights: dict[tuple[int, int], float] = defaultdict(float)
    for doc in documents:
        for link in doc.links:
            target = index.get(link.target_doc)
            w = float(link_weights.get(link.link_type, 0.0))
            if target is None or target == index[doc.id] or w <= 0:
                continue
            a, b = sorted((index[doc.id], target))
            weights[(a, b)] += w
    pairs = sorted(weights)
    graph = ig.Graph(n=len(ids), edges=pairs, directed=False)
    graph.vs["name"] = ids
    graph.es["weight"] = [weights[p] for p in pairs]
    return graph


class _LinkLayerBase:
    def __init__(
        self, name: str, first_stage: Any, documents: str, link_weights: Mapping[str, float] | None, candidates: int
    ) -> None:
        if first_stage is None:
            raise ValueError(f"retriever {name}: needs a `first_stage` (the retriever that seeds the graph)")
        self.name = name
        self.first_stage = build_retriever(first_stage)
        self.documents_path = Path(documents)
        self.link_weights = dict(link_weights or DEFAULT_LINK_WEIGHTS)
        self.candidates = candidates
        self.graph: Any = None
        self.doc_index: dict[str, int] = {}
        self.doc_of: dict[str, str] = {}
        self.chunks_of: dict[str, list[str]] = {}
        self.traces = RecentTraces()

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        build_first_stage(self.first_stage, chunks, workdir)

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        load_first_stage(self.first_stage, chunks, workdir)
        if not self.documents_path.exists():
            raise FileNotFoundError(f"{self.documents_path} not found; run `fixgraph ingest` first")
        documents = read_documents(self.documents_path)
        self.graph = document_link_graph(documents, self.link_weights)
        self.doc_index = {d.id: i for i, d in enumerate(documents)}
        self.doc_of = {c.id: c.doc_id for c in chunks}
        self.chunks_of = defaultdict(list)
        for c in chunks:
            self.chunks_of[c.doc_id].append(c.id)

    def trace(self, query: str) -> dict[str, Any]:
        return self.traces.get(query, {})


@RETRIEVERS.register("article_links")
class ArticleLinkRetriever(_LinkLayerBase):
    def __init__(
        self,
        name: str = "article_links",
        first_stage: Any = None,
        documents: str = "",
        link_weights: Mapping[str, float] | None = None,
        candidates: int = 100,
        damping: float = 0.5,
        mix: float = 0.3,
        seed_docs: int = 10,
        depth: int = 100,
    ) -> None:
        super().__init__(name, first_stage, documents, link_weights, candidates)
        self.damping, self.mix, self.seed_docs, self.depth = damping, mix, seed_docs, depth

    def search(self, query: str, k: int) -> list[Hit]:
        first = self.first_stage.search(query, self.candidates)
        reset = np.zeros(self.graph.vcount())
        seeds: dict[str, float] = {}
        for rank, hit in enumerate(first, start=1):
            doc = self.doc_of[hit.chunk_id]
            if doc in seeds or len(seeds) >= self.seed_docs:
                continue
            seeds[doc] = 1.0 / rank
            reset[self.doc_index[doc]] = seeds[doc]
        if not seeds:
            return []
        doc_scores = min_max(personalized_pagerank(self.graph, reset, self.damping))
        first_scores = dict(zip([h.chunk_id for h in first], min_max(np.array([h.score for h in first])), strict=True))
        candidates = set(first_scores)
        for i in np.argsort(-doc_scores, kind="stable")[: self.seed_docs]:
            candidates.update(self.chunks_of.get(self.graph.vs[int(i)]["name"], []))
        scored = {
            c: (1 - self.mix) * first_scores.get(c, 0.0) + self.mix * doc_scores[self.doc_index[self.doc_of[c]]]
            for c in candidates
        }
        self.traces[query] = {"seed_docs": seeds}
        order = sorted(scored, key=lambda c: (-scored[c], c))
        return [Hit(c, float(scored[c])) for c in order[: max(k, 0)]]


@RETRIEVERS.register("link_prior")
class LinkPriorRetriever(_LinkLayerBase):
    def __init__(
        self,
        name: str = "link_prior",
        first_stage: Any = None,
        documents: str = "",
        link_weights: Mapping[str, float] | None = None,
        rerank_depth: int = 20,
        weight: float = 0.5,
        candidates: int = 100,
        depth: int = 100,
    ) -> None:
        super().__init__(name, first_stage, documents, link_weights, candidates)
        self.rerank_depth, self.weight, self.depth = rerank_depth, weight, depth

    def search(self, query: str, k: int) -> list[Hit]:
        first = self.first_stage.search(query, max(k, self.rerank_depth))
        top, rest = first[: self.rerank_depth], first[self.rerank_depth :]
        if not top:
            return first[:k]
        norm = dict(zip([h.chunk_id for h in top], min_max(np.array([h.score for h in top])) + 1e-9, strict=True))
        page_score: dict[str, float] = {}
        for hit in top:  # a page's strength is its best chunk's
            doc = self.doc_of[hit.chunk_id]
            page_score[doc] = max(page_score.get(doc, 0.0), norm[hit.chunk_id])
        total = sum(page_score.values())
        support: dict[str, float] = {}
        for doc in page_score:
            neighbours = {self.graph.vs[n]["name"] for n in self.graph.neighbors(self.doc_index[doc])}
            support[doc] = sum(page_score[d] for d in neighbours if d in page_score and d != doc) / total
        rescored = {h.chunk_id: norm[h.chunk_id] + self.weight * support[self.doc_of[h.chunk_id]] for h in top}
        self.traces[query] = {"link_support": {d: round(s, 4) for d, s in support.items() if s > 0}}
        order = sorted(rescored, key=lambda c: (-rescored[c], c))
        # reordered hits score above every untouched one, so the merged list stays sorted
        floor = max((h.score for h in rest), default=0.0)
        reranked = [Hit(c, floor + 1.0 + rescored[c]) for c in order]
        return (reranked + rest)[: max(k, 0)]
