"""What graph retrievers share: the stored graph, aligned with the retriever's chunks.

Graph retrievers read the graph the `graph` stage built (artifacts/graph/<corpus>) when they load, so
their index folders hold only what does not depend on the graph (e.g. a dense channel). The loaded
index is cached per process, keyed by the graph's report file, because several systems of one
evaluation share it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse

from fixgraph.io import read_json
from fixgraph.kg.store import GraphStore


@dataclass
class GraphIndex:
    store: GraphStore
    node_ids: list[str]
    names: list[str]
    types: list[str]
    node_index: dict[str, int]
    chunk_ids: list[str]
    incidence: sparse.csr_matrix  # chunks x nodes: 1 where the chunk mentions the node
    chunks_per_node: np.ndarray  # |P_i|: how many chunks mention node i (HippoRAG's node specificity)
    vectors: np.ndarray | None  # node name embeddings (rows aligned with node_ids)
    vectors_embedder: str  # identity of the embedder that made `vectors`

    @property
    def n_nodes(self) -> int:
        return len(self.node_ids)


def _incidence(store: GraphStore, node_index: dict[str, int], chunk_ids: Sequence[str]) -> sparse.csr_matrix:
    chunk_index = {c: i for i, c in enumerate(chunk_ids)}
    rows, cols = [], []
    for node, chunks in store.node_chunks().items():
        if node not in node_index:
            continue
        for chunk in chunks:
            if chunk in chunk_index:
                rows.append(chunk_index[chunk])
                cols.append(node_index[node])
    data = np.ones(len(rows), dtype=np.float64)
    return sparse.csr_matrix((data, (rows, cols)), shape=(len(chunk_ids), len(node_index)))


def with_extra_edges(store: GraphStore, extra_edges: Path, weight: float) -> GraphStore:
    """The store plus a layer of predicted edges (`fixgraph linkpred`'s predicted_edges.parquet: source,
    target, relation, probability), each weighted `weight` x its probability; endpoints must be nodes."""
    import pandas as pd

    from fixgraph.kg.store import edge_id

    extra = pd.read_parquet(extra_edges)
    missing = {"source", "target", "relation", "probability"} - set(extra.columns)
    if missing:
        raise ValueError(f"{extra_edges}: predicted edges lack column(s) {', '.join(sorted(missing))}")
    known = set(store.nodes["node_id"])
    unknown = (~extra["source"].isin(known)) | (~extra["target"].isin(known))
    if unknown.any():
        raise ValueError(
            f"{extra_edges}: {int(unknown.sum())} predicted edges name nodes not in the graph; rerun linkpred"
        )
    layer = pd.DataFrame(
        {
            "edge_id": [
                edge_id(s, r, t) for s, r, t in zip(extra["source"], extra["relation"], extra["target"], strict=True)
            ],
            "source": extra["source"],
            "target": extra["target"],
            "relation": extra["relation"],
            "weight": weight * extra["probability"].astype(float),
            "n_chunks": 0,
            "extractors": [["link_prediction"]] * len(extra),
            "basis": "predicted",
        }
    )
    edges = pd.concat([store.edges, layer], ignore_index=True)
    return GraphStore(
        store.nodes, edges, store.mentions, store.rejections, store.merges, store.communities, store.report
    )


@lru_cache(maxsize=4)
def _load(
    folder: str, stamp: float, chunk_ids: tuple[str, ...], extra: str | None = None, weight: float = 1.0
) -> GraphIndex:
    path = Path(folder)
    store = GraphStore.read(path)
    if extra is not None:
        store = with_extra_edges(store, Path(extra), weight)
    node_ids = list(store.nodes["node_id"])
    node_index = {n: i for i, n in enumerate(node_ids)}
    incidence = _incidence(store, node_index, chunk_ids)
    vectors, embedder = None, ""
    if (path / "node_vectors.npy").exists():
        meta = read_json(path / "node_vectors.json")
        if meta["node_ids"] == node_ids:
            vectors, embedder = np.load(path / "node_vectors.npy"), str(meta["embedder"])
    return GraphIndex(
        store=store,
        node_ids=node_ids,
        names=list(store.nodes["name"]),
        types=list(store.nodes["type"]),
        node_index=node_index,
        chunk_ids=list(chunk_ids),
        incidence=incidence,
        chunks_per_node=np.asarray(incidence.sum(axis=0)).ravel(),
        vectors=vectors,
        vectors_embedder=embedder,
    )


def load_graph_index(
    graph_dir: str | Path,
    chunk_ids: Sequence[str],
    extra_edges: str | Path | None = None,
    extra_edge_weight: float = 1.0,
) -> GraphIndex:
    """The graph (plus, with `extra_edges`, a predicted-edge layer) aligned with the chunks."""
    folder = Path(graph_dir)
    report = folder / "report.json"
    if not report.exists():
        raise FileNotFoundError(
            f"{folder}: no knowledge graph; build it first with `fixgraph graph` (or `dvc repro graph`)"
        )
    if extra_edges is None:
        return _load(str(folder.resolve()), report.stat().st_mtime, tuple(chunk_ids))
    extra = Path(extra_edges)
    if not extra.exists():
        raise FileNotFoundError(f"{extra}: no predicted edges; build them with `fixgraph linkpred`")
    # the layer's mtime is part of the cache key too: a rerun of linkpred must not serve the old layer
    stamp = report.stat().st_mtime + extra.stat().st_mtime
    return _load(str(folder.resolve()), stamp, tuple(chunk_ids), str(extra.resolve()), float(extra_edge_weight))


def graph_meta(graph_dir: str | Path) -> dict[str, Any]:
    return dict(read_json(Path(graph_dir) / "report.json"))
