"""Personalized PageRank retrieval over the knowledge graph, as in HippoRAG 1 and HippoRAG 2.

HippoRAG 1 (`ppr_hipporag1`, Gutiérrez et al. 2024): question entities are linked to phrase nodes;
each seed's reset weight is its linking score times its node specificity 1/|P_i| (P_i: passages that
mention it); PPR runs with damping 0.5 over the entity graph plus synonymy edges; a passage scores
the sum of the PPR mass of the phrases it mentions.

HippoRAG 2 (`ppr_hipporag2`, Gutiérrez et al. 2025): passages are nodes of the graph, joined to the
phrases they mention; reset weights are the seed phrases' scores divided by their passage counts
(averaged per phrase) plus every passage's min-max-normalised first-stage score x 0.05
(`passage_node_weight`); a passage scores its own PPR mass. The paper seeds passages with dense
similarity; here `first_stage` is any retriever config (dense_mpnet, hybrid_weighted, ...): one with
full score vectors (`scores()`: dense, BM25) seeds every passage, any other its top `candidates`.

Both call igraph's prpack solver (as HippoRAG's code does), tested against networkx to 1e-6.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from fixgraph.corpus.models import Chunk
from fixgraph.embedders.encoders import build_embedder
from fixgraph.kg.loaders import passage_node, to_igraph
from fixgraph.retrieval.base import (
    RETRIEVERS,
    Hit,
    RecentTraces,
    build_first_stage,
    build_retriever,
    check_chunk_ids,
    hits_from_scores,
    load_first_stage,
    write_chunk_ids,
)
from fixgraph.retrieval.entity_linking import EntityLinker, Seed
from fixgraph.retrieval.graph_index import GraphIndex, load_graph_index


@lru_cache(maxsize=1)
def _threadpools() -> Any:
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def personalized_pagerank(graph: Any, reset: np.ndarray, damping: float, threads: int = 1) -> np.ndarray:
    """Stationary distribution of a walk that follows weighted edges with probability `damping` and
    jumps back to `reset` (normalised) otherwise. igraph's prpack, as HippoRAG uses it.

    prpack parallelises its sweep with OpenMP; on graphs of a few thousand nodes the thread hand-offs
    cost more than they save (measured here: 3 ms of CPU with one thread, 30+ ms with two on a busy
    2-core machine), so the OpenMP pool is limited to `threads` during the call."""
    reset = np.where(np.isnan(reset) | (reset < 0), 0.0, reset)
    if reset.sum() <= 0:
        return np.zeros(graph.vcount())
    with _threadpools().limit(limits=threads, user_api="openmp"):
        scores = graph.personalized_pagerank(
            vertices=None,
            directed=False,
            damping=damping,
            weights="weight",
            reset=reset.tolist(),
            implementation="prpack",
        )
    return np.asarray(scores, dtype=np.float64)


def min_max(scores: np.ndarray) -> np.ndarray:
    low, high = float(scores.min(initial=0.0)), float(scores.max(initial=0.0))
    return (scores - low) / (high - low) if high > low else np.zeros_like(scores)


def synonymy_edges(
    index: GraphIndex, threshold: float, top_k: int, types: Sequence[str]
) -> list[tuple[int, int, float]]:
    """HippoRAG's synonymy edges: node pairs whose name vectors have cosine >= threshold (top_k per
    node), restricted to globally scoped types so no edge joins two articles' own fixes."""
    if index.vectors is None or threshold > 1.0 or not types:
        return []
    allowed = np.flatnonzero(np.isin(np.asarray(index.types), list(types)))
    if len(allowed) < 2:
        return []
    vectors = index.vectors[allowed]
    edges: dict[tuple[int, int], float] = {}
    for start in range(0, len(allowed), 1024):
        sims = vectors[start : start + 1024] @ vectors.T
        for row, values in enumerate(sims):
            i = start + row
            values[i] = -1.0
            for j in np.argsort(-values, kind="stable")[:top_k]:
                if values[j] < threshold:
                    break
                a, b = sorted((int(allowed[i]), int(allowed[j])))
                edges[(a, b)] = float(values[j])
    return [(a, b, w) for (a, b), w in sorted(edges.items())]


class _GraphRetrieverBase:
    """Config, seeds and traces shared by the graph retrievers."""

    def __init__(
        self,
        name: str,
        graph_dir: str,
        embedder: Any = None,
        ontology: Any = None,
        linking: Mapping[str, Any] | None = None,
        damping: float = 0.5,
        depth: int = 100,
        link_top_k: int = 5,
        synonym_threshold: float = 0.8,
        synonym_top_k: int = 10,
        synonym_types: Sequence[str] = ("App", "UIElement", "Command", "File", "Key", "Concept"),
        extra_edges: str | None = None,
        extra_edge_weight: float = 1.0,
    ) -> None:
        self.name = name
        self.graph_dir = graph_dir
        self.embedder = build_embedder(embedder) if embedder is not None else None
        self.ontology_cfg = ontology
        self.linking = dict(linking or {})
        self.damping, self.depth, self.link_top_k = damping, depth, link_top_k
        self.synonym_threshold, self.synonym_top_k, self.synonym_types = synonym_threshold, synonym_top_k, synonym_types
        # a layer of predicted links (`fixgraph linkpred`), weighted extra_edge_weight x probability
        self.extra_edges, self.extra_edge_weight = extra_edges, extra_edge_weight
        self.index: GraphIndex | None = None
        self.linker: EntityLinker | None = None
        self.traces = RecentTraces()

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        write_chunk_ids(workdir, chunks)  # the graph itself is the `graph` stage's output

    def _load_graph(self, chunks: Sequence[Chunk]) -> GraphIndex:
        from fixgraph.kg.ontology import build_ontology

        self.index = load_graph_index(self.graph_dir, [c.id for c in chunks], self.extra_edges, self.extra_edge_weight)
        ontology = build_ontology(self.ontology_cfg) if self.ontology_cfg is not None else None
        self.linker = EntityLinker(self.index, self.embedder, ontology, **self.linking)
        return self.index

    def _edges_with_synonyms(self, graph: Any) -> Any:
        assert self.index is not None
        extra = synonymy_edges(self.index, self.synonym_threshold, self.synonym_top_k, self.synonym_types)
        if extra:
            start = graph.ecount()
            graph.add_edges([(a, b) for a, b, _ in extra])
            graph.es[start:]["weight"] = [w for _, _, w in extra]
            graph.es[start:]["relation"] = ["synonym"] * len(extra)
        return graph

    def seeds(self, query: str) -> list[Seed]:
        """The `link_top_k` linked nodes with the highest specificity-weighted score (score / |P_i|), as
        HippoRAG 2 keeps only its top `linking_top_k` phrases: a question's generic words ("laptop",
        "settings") would otherwise seed half the graph."""
        assert self.linker is not None and self.index is not None, "load() first"
        seeds = self.linker.link(query)

        def weighted(seed: Seed) -> float:
            assert self.index is not None
            return seed.score / max(float(self.index.chunks_per_node[self.index.node_index[seed.node_id]]), 1.0)

        return sorted(seeds, key=lambda s: (-weighted(s), s.node_id))[: self.link_top_k]

    def trace(self, query: str) -> dict[str, Any]:
        """What the last search of `query` did: its seeds (recorded per question by the evaluation)."""
        return self.traces.get(query, {})


@RETRIEVERS.register("ppr_hipporag1")
class HippoRAG1Retriever(_GraphRetrieverBase):
    def __init__(self, name: str = "ppr_hipporag1", graph_dir: str = "", **kw: Any) -> None:
        kw = {k: v for k, v in kw.items() if k in _BASE_ARGS}
        super().__init__(name, graph_dir, **kw)
        self.graph: Any = None

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        check_chunk_ids(workdir, chunks)
        index = self._load_graph(chunks)
        self.graph = self._edges_with_synonyms(to_igraph(index.store))

    def reset_weights(self, seeds: Sequence[Seed]) -> np.ndarray:
        """Seed score x node specificity 1/|P_i| (HippoRAG 1, section 3.2)."""
        assert self.index is not None
        reset = np.zeros(self.index.n_nodes)
        for seed in seeds:
            i = self.index.node_index[seed.node_id]
            reset[i] += seed.score / max(float(self.index.chunks_per_node[i]), 1.0)
        return reset

    def search(self, query: str, k: int) -> list[Hit]:
        assert self.index is not None
        seeds = self.seeds(query)
        self.traces[query] = {"seeds": [s.as_dict() for s in seeds]}
        reset = self.reset_weights(seeds)
        if reset.sum() <= 0:
            return []
        mass = personalized_pagerank(self.graph, reset, self.damping)
        passage_scores = self.index.incidence @ mass  # sum of the PPR mass of each passage's phrases
        return [h for h in hits_from_scores(passage_scores, self.index.chunk_ids, k) if h.score > 0]


@RETRIEVERS.register("ppr_hipporag2")
class HippoRAG2Retriever(_GraphRetrieverBase):
    def __init__(
        self,
        name: str = "ppr_hipporag2",
        graph_dir: str = "",
        first_stage: Any = None,
        candidates: int = 100,
        passage_node_weight: float = 0.05,
        passage_edge_weight: float = 1.0,
        **kw: Any,
    ) -> None:
        kw = {k: v for k, v in kw.items() if k in _BASE_ARGS}
        super().__init__(name, graph_dir, **kw)
        if first_stage is None:
            raise ValueError(f"retriever {name}: needs a `first_stage` retriever config for the passage reset weights")
        self.first_stage = build_retriever(first_stage)
        self.candidates = candidates
        self.passage_node_weight = passage_node_weight
        self.passage_edge_weight = passage_edge_weight
        self.graph: Any = None
        self.passage_vertices = np.zeros(0, dtype=np.int64)

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        build_first_stage(self.first_stage, chunks, workdir)

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        load_first_stage(self.first_stage, chunks, workdir)
        index = self._load_graph(chunks)
        graph = to_igraph(index.store, passages=index.chunk_ids, passage_edge_weight=self.passage_edge_weight)
        self.graph = self._edges_with_synonyms(graph)
        vertex = {name: i for i, name in enumerate(self.graph.vs["name"])}
        self.passage_vertices = np.array([vertex[passage_node(c)] for c in index.chunk_ids], dtype=np.int64)

    def reset_weights(self, seeds: Sequence[Seed], passage_scores: np.ndarray) -> np.ndarray:
        assert self.index is not None
        reset = np.zeros(self.graph.vcount())
        for seed in seeds:
            i = self.index.node_index[seed.node_id]
            reset[i] += seed.score / max(float(self.index.chunks_per_node[i]), 1.0)
        reset[self.passage_vertices] = min_max(passage_scores) * self.passage_node_weight
        return reset

    def passage_scores(self, query: str) -> np.ndarray:
        """The first stage's score of every passage (index order); without full score vectors, its top
        `candidates` min-max scaled into (0, 1] and 0 for the rest."""
        assert self.index is not None
        full = getattr(self.first_stage, "scores", None)
        if full is not None:
            return np.asarray(full(query), dtype=np.float64)
        hits = self.first_stage.search(query, self.candidates)
        scores = np.zeros(len(self.index.chunk_ids))
        if hits:
            position = {c: i for i, c in enumerate(self.index.chunk_ids)}
            scaled = min_max(np.array([h.score for h in hits], dtype=np.float64)) * (1 - 1e-3) + 1e-3
            for hit, value in zip(hits, scaled, strict=True):
                scores[position[hit.chunk_id]] = value
        return scores

    def search(self, query: str, k: int) -> list[Hit]:
        assert self.index is not None
        seeds = self.seeds(query)
        self.traces[query] = {"seeds": [s.as_dict() for s in seeds]}
        mass = personalized_pagerank(self.graph, self.reset_weights(seeds, self.passage_scores(query)), self.damping)
        return hits_from_scores(mass[self.passage_vertices], self.index.chunk_ids, k)


_BASE_ARGS = frozenset(
    {
        "embedder",
        "ontology",
        "linking",
        "damping",
        "depth",
        "link_top_k",
        "synonym_threshold",
        "synonym_top_k",
        "synonym_types",
        "extra_edges",
        "extra_edge_weight",
    }
)
