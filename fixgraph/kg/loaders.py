"""Load a stored graph into python-igraph (retrieval) or networkx (tests, analysis).

Both loaders keep node ids as the `name` attribute (igraph) or node keys (networkx), and carry type,
relation and weight attributes. With `passages=True` chunk nodes are added and joined to the entities
they mention, as HippoRAG 2 does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fixgraph.kg.store import GraphStore

PASSAGE_PREFIX = "chunk|"


def passage_node(chunk_id: str) -> str:
    return PASSAGE_PREFIX + chunk_id


def _passage_edges(store: GraphStore, weight: float) -> list[tuple[str, str, float]]:
    return [
        (passage_node(chunk), node, weight)
        for node, chunks in sorted(store.node_chunks().items())
        for chunk in sorted(chunks)
    ]


def _passage_ids(store: GraphStore, passages: bool | Sequence[str]) -> list[str]:
    """Chunk ids to add as passage nodes: every chunk given, or (True) every chunk with a mention."""
    if passages is True:
        return sorted({c for chunks in store.node_chunks().values() for c in chunks})
    return list(passages) if passages else []


def to_igraph(store: GraphStore, passages: bool | Sequence[str] = False, passage_edge_weight: float = 1.0) -> Any:
    """An undirected igraph.Graph; parallel edges of different relations are kept (their weights add
    up in PageRank, like HippoRAG's summed edge counts). `passages`: True for every chunk with a
    mention, or the chunk ids to add (chunks without mentions become isolated passage nodes)."""
    import igraph as ig

    names = list(store.nodes["node_id"])
    types = list(store.nodes["type"])
    chunk_ids = _passage_ids(store, passages)
    names += [passage_node(c) for c in chunk_ids]
    types += ["Passage"] * len(chunk_ids)
    index = {name: i for i, name in enumerate(names)}
    edges = [(index[s], index[t]) for s, t in zip(store.edges["source"], store.edges["target"], strict=True)]
    weights = [float(w) for w in store.edges["weight"]]
    relations = list(store.edges["relation"])
    if chunk_ids:
        for s, t, w in _passage_edges(store, passage_edge_weight):
            if s in index:
                edges.append((index[s], index[t]))
                weights.append(w)
                relations.append("mentions")
    graph = ig.Graph(n=len(names), edges=edges, directed=False)
    graph.vs["name"] = names
    graph.vs["type"] = types
    graph.es["weight"] = weights
    graph.es["relation"] = relations
    return graph


def to_networkx(store: GraphStore, passages: bool | Sequence[str] = False, passage_edge_weight: float = 1.0) -> Any:
    """An undirected networkx.MultiGraph with the same nodes, edges and weights as `to_igraph`."""
    import networkx as nx

    graph = nx.MultiGraph()
    for node, node_type, name in zip(store.nodes["node_id"], store.nodes["type"], store.nodes["name"], strict=True):
        graph.add_node(node, type=node_type, label=name)
    for s, t, w, r in zip(
        store.edges["source"], store.edges["target"], store.edges["weight"], store.edges["relation"], strict=True
    ):
        graph.add_edge(s, t, weight=float(w), relation=r)
    chunk_ids = _passage_ids(store, passages)
    for c in chunk_ids:
        graph.add_node(passage_node(c), type="Passage", label=c)
    if chunk_ids:
        for s, t, w in _passage_edges(store, passage_edge_weight):
            if s in graph:
                graph.add_edge(s, t, weight=w, relation="mentions")
    return graph
