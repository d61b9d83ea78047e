"""Link prediction on the knowledge graph: the held-out split, type-compatible negatives, heuristic
scores and ranking metrics; the GNN that competes with these is training/link_prediction.py. (Kept out
of fixgraph/kg: the graph stage's key hashes that package, and this code does not shape the graph.)

Split (`split_edges`): per relation type, `test_fraction` and `val_fraction` of its edges are held out
(stratified, seeded). Held-out node PAIRS are removed from the training graph entirely, with every
relation between them, so no method sees a held-out pair as adjacent under another relation name.

Negatives (`sample_negatives`): for a held-out edge (h, r, t), up to `negatives` nodes of t's type,
never t itself, h, or any t' with (h, r, t') in the full graph (the "filtered" setting): a method ranks
the true tail among type-compatible alternatives, so the type alone tells nothing.

Heuristics (networkx, on the undirected training graph): common neighbours, Adamic-Adar, resource
allocation, Jaccard; plus the cosine of node-name embeddings (no graph at all).

Metrics per held-out edge (`edge_metrics`): rank of the true tail among tail + negatives with ties
counted half (a constant scorer gets the expected rank of a random order, not rank 1), reciprocal
rank, hits@10, and AUC = P(score(true) > score(negative)) with ties half. Their means over edges are
MRR, Hits@10 and the edge-averaged AUC, with bootstrap CIs over edges.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

HEURISTICS = ("common_neighbours", "adamic_adar", "resource_allocation", "jaccard")


@dataclass(frozen=True)
class EdgeSplit:
    train: pd.DataFrame  # source, target, relation: the message-passing / heuristic graph
    validation: pd.DataFrame  # held-out edges: source, target, relation, edge_id
    test: pd.DataFrame


def _pair(a: object, b: object) -> tuple[str, str]:
    x, y = str(a), str(b)
    return (x, y) if x <= y else (y, x)


def split_edges(
    edges: pd.DataFrame, test_fraction: float, val_fraction: float, min_relation_edges: int, seed: int
) -> EdgeSplit:
    """Stratified by relation; relations with fewer than `min_relation_edges` edges are not held out
    (one or two test edges give no estimate) but stay in the training graph."""
    if not 0 < test_fraction < 1 or not 0 < val_fraction < 1 or test_fraction + val_fraction >= 1:
        raise ValueError(f"link prediction: bad fractions test={test_fraction}, val={val_fraction}")
    rng = random.Random(seed)
    frame = edges[["edge_id", "source", "target", "relation"]].sort_values("edge_id").reset_index(drop=True)
    held: dict[str, list[int]] = {"test": [], "validation": []}
    for relation in sorted(frame["relation"].unique()):
        rows = frame.index[frame["relation"] == relation].tolist()
        if len(rows) < min_relation_edges:
            continue
        rng.shuffle(rows)
        n_test = max(1, round(test_fraction * len(rows)))
        n_val = max(1, round(val_fraction * len(rows)))
        held["test"] += rows[:n_test]
        held["validation"] += rows[n_test : n_test + n_val]
    pairs = {_pair(frame.at[i, "source"], frame.at[i, "target"]) for part in held.values() for i in part}
    # a pair held out in one part must not appear as a held-out edge of the other part either
    test_pairs = {_pair(frame.at[i, "source"], frame.at[i, "target"]) for i in held["test"]}
    held["validation"] = [
        i for i in held["validation"] if _pair(frame.at[i, "source"], frame.at[i, "target"]) not in test_pairs
    ]
    in_held = frame.apply(lambda r: _pair(r["source"], r["target"]) in pairs, axis=1)
    train = frame[~in_held].reset_index(drop=True)
    return EdgeSplit(
        train=train,
        validation=frame.loc[sorted(held["validation"])].reset_index(drop=True),
        test=frame.loc[sorted(held["test"])].reset_index(drop=True),
    )


def sample_negatives(
    held_out: pd.DataFrame, all_edges: pd.DataFrame, node_types: dict[str, str], negatives: int, seed: int
) -> list[list[str]]:
    """For each held-out edge, up to `negatives` type-compatible false tails (filtered setting)."""
    rng = random.Random(seed)
    by_type: dict[str, list[str]] = defaultdict(list)
    for node, node_type in sorted(node_types.items()):
        by_type[node_type].append(node)
    true_tails: dict[tuple[str, str], set[str]] = defaultdict(set)
    for s, r, t in zip(all_edges["source"], all_edges["relation"], all_edges["target"], strict=True):
        true_tails[(s, r)].add(t)
    out = []
    for s, r, t in zip(held_out["source"], held_out["relation"], held_out["target"], strict=True):
        excluded = true_tails[(s, r)] | {s, t}
        pool = [n for n in by_type[node_types[t]] if n not in excluded]
        out.append(sorted(rng.sample(pool, min(negatives, len(pool)))))
    return out


def edge_metrics(true_score: float, negative_scores: Sequence[float] | np.ndarray, k: int = 10) -> dict[str, float]:
    """Rank (ties count half), reciprocal rank, hits@k and AUC of one held-out edge."""
    negs = np.asarray(negative_scores, dtype=float)
    greater = float(np.sum(negs > true_score))
    equal = float(np.sum(negs == true_score))
    rank = 1.0 + greater + 0.5 * equal
    n = len(negs)
    return {
        "rank": rank,
        "mrr": 1.0 / rank,
        f"hits_at_{k}": float(rank <= k),
        "auc": (n - greater - 0.5 * equal) / n if n else float("nan"),
        "candidates": float(n + 1),
    }


def train_graph(train: pd.DataFrame, nodes: Sequence[str]) -> object:
    """The undirected simple graph of training edges (every node present, isolated or not)."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(nodes)
    graph.add_edges_from(zip(train["source"], train["target"], strict=True))
    graph.remove_edges_from(list(nx.selfloop_edges(graph)))
    return graph


def heuristic_scorer(name: str, graph: object) -> Callable[[Sequence[tuple[str, str]]], np.ndarray]:
    """A function scoring (u, v) pairs with one of HEURISTICS, computed by networkx."""
    import networkx as nx

    functions = {
        "adamic_adar": nx.adamic_adar_index,
        "resource_allocation": nx.resource_allocation_index,
        "jaccard": nx.jaccard_coefficient,
    }
    if name not in HEURISTICS:
        raise ValueError(f"unknown heuristic {name!r}; valid: {', '.join(HEURISTICS)}")

    def score(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        if name == "common_neighbours":
            return np.array([len(list(nx.common_neighbors(graph, u, v))) for u, v in pairs], dtype=float)
        return np.array([p for _, _, p in functions[name](graph, list(pairs))], dtype=float)

    return score


def score_held_out(
    held_out: pd.DataFrame,
    negatives: Sequence[Sequence[str]],
    score: Callable[[Sequence[tuple[str, str, str]]], np.ndarray],
) -> pd.DataFrame:
    """One row of edge metrics per held-out edge; `score` gets (head, relation, tail) triples."""
    triples: list[tuple[str, str, str]] = []
    for (s, r, t), negs in zip(
        held_out[["source", "relation", "target"]].itertuples(index=False), negatives, strict=True
    ):
        triples.append((s, r, t))
        triples.extend((s, r, n) for n in negs)
    values = score(triples)
    rows, at = [], 0
    for edge_id, relation, negs in zip(held_out["edge_id"], held_out["relation"], negatives, strict=True):
        true_score, negative_scores = values[at], values[at + 1 : at + 1 + len(negs)]
        at += 1 + len(negs)
        rows.append({"edge_id": edge_id, "relation": relation, **edge_metrics(float(true_score), negative_scores)})
    return pd.DataFrame(rows)


def pairwise(
    score: Callable[[Sequence[tuple[str, str]]], np.ndarray],
) -> Callable[[Sequence[tuple[str, str, str]]], np.ndarray]:
    """A relation-blind (u, v) scorer as a triple scorer."""
    return lambda triples: score([(h, t) for h, _, t in triples])


def cosine_scorer(vectors: np.ndarray, index: dict[str, int]) -> Callable[[Sequence[tuple[str, str]]], np.ndarray]:
    """Cosine of the two nodes' name vectors (rows of `vectors`, L2-normalised here)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.maximum(norms, 1e-12)

    def score(pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        a = unit[[index[u] for u, _ in pairs]]
        b = unit[[index[v] for _, v in pairs]]
        return np.sum(a * b, axis=1)

    return score
