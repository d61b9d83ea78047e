"""Typed path search: schema-valid paths of up to `max_hops` edges from the question's seed nodes.

A path may cross an edge in either direction, but every hop must be allowed by the ontology
(source type, relation, target type), use one of the configured `relations`, and never revisit a
node. Paths are expanded breadth-first with a beam; hubs (degree above `max_degree`) end paths
instead of extending them, since a walk through "Settings" reaches half the corpus. A path's score
is its seed's score x `decay` per hop; it is credited to the chunks that state its last edge (split
evenly among them). Seeds credit the chunks that mention them, divided by how many do (HippoRAG's node
specificity), so "computer" lends little and "Bluetooth adapter" a lot.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fixgraph.corpus.models import Chunk
from fixgraph.kg.ontology import Ontology, build_ontology
from fixgraph.retrieval.base import RETRIEVERS, Hit, check_chunk_ids, hits_from_scores
from fixgraph.retrieval.ppr import _BASE_ARGS, _GraphRetrieverBase

Step = tuple[int, str, str, bool]  # neighbour, relation, edge id, crossed forward (source -> target)
_Path = tuple[float, tuple[int, ...], tuple[str, ...]]  # score, nodes, relations


@RETRIEVERS.register("typed_paths")
class TypedPathRetriever(_GraphRetrieverBase):
    def __init__(
        self,
        name: str = "typed_paths",
        graph_dir: str = "",
        max_hops: int = 3,
        decay: float = 0.5,
        relations: Sequence[str] = (),
        beam: int = 400,
        max_degree: int = 60,
        **kw: Any,
    ) -> None:
        super().__init__(name, graph_dir, **{k: v for k, v in kw.items() if k in _BASE_ARGS})
        if not 1 <= max_hops <= 3:
            raise ValueError(f"retriever {name}: max_hops must be 1, 2 or 3, got {max_hops}")
        if self.ontology_cfg is None:
            raise ValueError(f"retriever {name}: needs the `ontology` to check paths against")
        self.max_hops, self.decay, self.relations = max_hops, decay, set(relations)
        self.beam, self.max_degree = beam, max_degree
        self.ontology: Ontology | None = None
        self.adjacency: list[list[Step]] = []
        self.edge_chunks: dict[str, list[int]] = {}
        self.node_chunks: list[np.ndarray] = []

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        check_chunk_ids(workdir, chunks)
        index = self._load_graph(chunks)
        self.ontology = build_ontology(self.ontology_cfg)
        self.adjacency = [[] for _ in range(index.n_nodes)]
        edges = index.store.edges
        for eid, s, t, rel in zip(edges["edge_id"], edges["source"], edges["target"], edges["relation"], strict=True):
            if self.relations and rel not in self.relations:
                continue
            a, b = index.node_index[s], index.node_index[t]
            self.adjacency[a].append((b, rel, eid, True))
            self.adjacency[b].append((a, rel, eid, False))
        incidence = index.incidence.tocsc()
        self.node_chunks = [incidence[:, i].nonzero()[0] for i in range(index.n_nodes)]
        chunk_pos = {c: i for i, c in enumerate(index.chunk_ids)}
        self.edge_chunks = {
            e: sorted(chunk_pos[c] for c in cs if c in chunk_pos) for e, cs in index.store.edge_chunks().items()
        }

    def _valid(self, here: int, step: Step) -> bool:
        assert self.index is not None and self.ontology is not None
        there, rel, _, forward = step
        source, target = (here, there) if forward else (there, here)
        return self.ontology.allows(self.index.types[source], rel, self.index.types[target])

    def search(self, query: str, k: int) -> list[Hit]:
        assert self.index is not None
        index = self.index
        seeds = self.seeds(query)
        scores = np.zeros(len(index.chunk_ids))
        frontier: list[_Path] = []
        for seed in seeds:
            node = index.node_index[seed.node_id]
            rows = self.node_chunks[node]
            if len(rows):
                scores[rows] += seed.score / len(rows)
            frontier.append((seed.score, (node,), ()))
        best_paths: list[_Path] = []
        for _hop in range(self.max_hops):
            grown: list[_Path] = []
            for score, nodes, rels in frontier:
                here = nodes[-1]
                if len(nodes) > 1 and len(self.adjacency[here]) > self.max_degree:
                    continue  # a hub ends the path
                for step in self.adjacency[here]:
                    there, rel, eid, _ = step
                    if there in nodes or not self._valid(here, step):
                        continue
                    new_score = score * self.decay
                    evidence = self.edge_chunks.get(eid, [])
                    if evidence:
                        scores[evidence] += new_score / len(evidence)
                    grown.append((new_score, (*nodes, there), (*rels, rel)))
            grown.sort(key=lambda p: (-p[0], p[1]))
            frontier = grown[: self.beam]
            best_paths.extend(frontier[:5])
        best_paths.sort(key=lambda p: (-p[0], p[1]))
        self.traces[query] = {
            "seeds": [s.as_dict() for s in seeds],
            "paths": [
                {"score": round(score, 4), "nodes": [index.names[n] for n in nodes], "relations": list(rels)}
                for score, nodes, rels in best_paths[:5]
            ],
        }
        return [h for h in hits_from_scores(scores, index.chunk_ids, k) if h.score > 0]
