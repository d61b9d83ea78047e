"""Link prediction on the graph: the held-out split, filtered type-compatible negatives, tie-aware
ranking metrics, the networkx heuristics against hand-computed values, a GNN that learns a toy graph
where only message passing can tell, and the predicted-edge layer of the graph retrievers."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from fixgraph.kg.store import EDGE_COLUMNS, MENTION_COLUMNS, NODE_COLUMNS, GraphStore, edge_id
from fixgraph.training.edges import edge_metrics, heuristic_scorer, sample_negatives, split_edges, train_graph


def _edges(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"edge_id": edge_id(s, r, t), "source": s, "target": t, "relation": r, "weight": 1.0} for s, r, t in rows]
    )


def test_split_is_stratified_by_relation_and_drops_held_out_pairs_from_training() -> None:
    rows = [(f"a{i}", "uses", f"b{i}") for i in range(40)] + [(f"c{i}", "has_step", f"d{i}") for i in range(20)]
    rows += [("a0", "related_to", "b0"), ("a1", "related_to", "b1"), ("x", "rare", "y")]  # parallel + rare
    split = split_edges(_edges(rows), test_fraction=0.1, val_fraction=0.05, min_relation_edges=10, seed=1)
    assert split.test["relation"].value_counts().to_dict() == {"uses": 4, "has_step": 2}
    assert split.validation["relation"].value_counts().to_dict() == {"uses": 2, "has_step": 1}
    held = {frozenset(p) for p in zip(split.test["source"], split.test["target"], strict=True)}
    held |= {frozenset(p) for p in zip(split.validation["source"], split.validation["target"], strict=True)}
    train_pairs = {frozenset(p) for p in zip(split.train["source"], split.train["target"], strict=True)}
    assert held.isdisjoint(train_pairs)  # no held-out pair is adjacent in training, under any relation
    assert ("x", "y") in set(zip(split.train["source"], split.train["target"], strict=True))  # rare: kept, not held
    assert len(split.train) + len(held) >= len(rows) - 2
    again = split_edges(_edges(rows), 0.1, 0.05, 10, seed=1)
    assert again.test.equals(split.test)


def test_negatives_have_the_true_tails_type_and_are_filtered() -> None:
    edges = _edges([("h", "uses", "t1"), ("h", "uses", "t2"), ("g", "uses", "t3")])
    types = {"h": "Step", "g": "Step", "t1": "App", "t2": "App", "t3": "App", "t4": "App", "t5": "App", "k": "Key"}
    held = edges.iloc[[0]]
    (negatives,) = sample_negatives(held, edges, types, negatives=10, seed=0)
    assert negatives == ["t3", "t4", "t5"]  # t2 is also a true tail of (h, uses): never a negative
    (two,) = sample_negatives(held, edges, types, negatives=2, seed=0)
    assert len(two) == 2 and set(two) <= {"t3", "t4", "t5"}


def test_edge_metrics_count_ties_half() -> None:
    m = edge_metrics(0.5, [0.9, 0.5, 0.1, 0.1])
    assert m == {"rank": 2.5, "mrr": 0.4, "hits_at_10": 1.0, "auc": 0.625, "candidates": 5.0}
    constant = edge_metrics(0.0, [0.0] * 99)  # a scorer that says nothing ranks at the middle
    assert constant["rank"] == 50.5 and constant["auc"] == 0.5 and constant["hits_at_10"] == 0.0


def test_heuristics_match_hand_computed_values() -> None:
    train = pd.DataFrame({"source": ["a", "a", "b", "c", "d"], "target": ["b", "c", "d", "d", "e"]})
    graph = train_graph(train, ["a", "b", "c", "d", "e", "lonely"])
    pair = [("a", "d")]  # common neighbours b and c, both of degree 2; N(a) | N(d) = {b, c, e}
    assert heuristic_scorer("common_neighbours", graph)(pair).tolist() == [2.0]
    assert heuristic_scorer("adamic_adar", graph)(pair)[0] == pytest.approx(2 / math.log(2))
    assert heuristic_scorer("resource_allocation", graph)(pair)[0] == pytest.approx(1.0)
    assert heuristic_scorer("jaccard", graph)(pair)[0] == pytest.approx(2 / 3)
    assert heuristic_scorer("adamic_adar", graph)([("a", "lonely")]).tolist() == [0.0]
    with pytest.raises(ValueError, match="unknown heuristic"):
        heuristic_scorer("katz", graph)


def _toy_store(folder: Path) -> Path:
    """4 clusters of 5 Steps and 5 Apps; every Step uses every App of its cluster. Names are arbitrary
    tokens, so only the graph says which held-out App a Step uses."""
    nodes, rows = [], []
    for cluster in range(4):
        steps = [f"Step|s{cluster}{i}" for i in range(5)]
        apps = [f"App|a{cluster}{i}" for i in range(5)]
        nodes += [(n, "Step") for n in steps] + [(n, "App") for n in apps]
        rows += [(s, "uses", a) for s in steps for a in apps]
    node_frame = pd.DataFrame(
        [
            {
                "node_id": n,
                "type": t,
                "scope": "",
                "name": f"token{i * 7919 % 97}",
                "key": n,
                "aliases": [],
                "n_mentions": 1,
                "n_chunks": 1,
                "community": -1,
            }
            for i, (n, t) in enumerate(nodes)
        ],
        columns=NODE_COLUMNS,
    )
    edges = _edges(rows).assign(n_chunks=1, extractors=[["structural"]] * len(rows), basis="text")[EDGE_COLUMNS]
    GraphStore(node_frame, edges, pd.DataFrame(columns=MENTION_COLUMNS)).write(folder)
    return folder


def test_gnn_learns_held_out_links_that_only_the_graph_reveals(tmp_path: Path) -> None:
    pytest.importorskip("torch_geometric")
    from fixgraph.training.link_prediction import LinkPredictionTrainer
    from fixgraph.training.linkpred_eval import score_methods

    graph = _toy_store(tmp_path / "graph")
    common = {
        "data_dir": str(tmp_path / "data"),
        "node_embedder": {"name": "hashing", "kind": "hashing", "dim": 64},
        "data": {
            "graph_dir": str(graph),
            "test_fraction": 0.15,
            "val_fraction": 0.1,
            "min_relation_edges": 10,
            "negatives": 10,
        },
        "hidden": 32,
        "learning_rate": 0.02,
        "batch_edges": 16,
        "train_negatives": 4,
        "name_skip": False,
        "fit": {"epochs": 40, "patience": 40, "threads": 1, "monitor": "val_mrr", "mode": "max"},
    }
    sage = LinkPredictionTrainer(name="sage", output=str(tmp_path / "sage"), encoder="sage", **common)
    mlp = LinkPredictionTrainer(name="mlp", output=str(tmp_path / "mlp"), encoder="mlp", **common)
    (tmp_path / "data").mkdir()
    info = sage.build_data(None, tmp_path / "data")  # type: ignore[arg-type]
    assert info["splits"] == {"train": 75, "validation": 10, "test": 15}
    for trainer in (sage, mlp):
        Path(trainer.output).mkdir()
        facts = trainer.train(None, tmp_path / "data", Path(trainer.output), tmp_path / f"work-{trainer.name}", None)  # type: ignore[arg-type]
        assert facts["steps"] == 40 * 5 and not math.isnan(facts["best_monitored"])
    test = score_methods(tmp_path / "data", {"sage": tmp_path / "sage", "mlp": tmp_path / "mlp"}, "test")
    mrr = test.groupby("system")["mrr"].mean()
    # random order among 10 same-type negatives has MRR ~0.27; a common-neighbour count is 0 for every
    # candidate of a 2-partite cluster (Steps link only to Apps), so only learnt structure helps here
    assert mrr["sage"] > 0.8 > mrr["mlp"]
    assert mrr["common_neighbours"] == pytest.approx(1 / (1 + 0.5 * 10))  # all tied: the middle of 11


def test_predicted_layer_joins_the_graph_with_probability_weights(tmp_path: Path) -> None:
    from fixgraph.retrieval.graph_index import load_graph_index

    graph = _toy_store(tmp_path / "graph")
    (graph / "report.json").write_text("{}")
    layer = tmp_path / "predicted.parquet"
    pd.DataFrame(
        {"source": ["Step|s00"], "target": ["App|a10"], "relation": ["uses"], "probability": [0.95]}
    ).to_parquet(layer)
    plain = load_graph_index(graph, ["c1"])
    extended = load_graph_index(graph, ["c1"], layer, extra_edge_weight=0.5)
    assert len(extended.store.edges) == len(plain.store.edges) + 1
    added = extended.store.edges.iloc[-1]
    assert (added["source"], added["target"], added["basis"]) == ("Step|s00", "App|a10", "predicted")
    assert added["weight"] == pytest.approx(0.475)
    pd.DataFrame({"source": ["ghost"], "target": ["App|a10"], "relation": ["uses"], "probability": [0.9]}).to_parquet(
        tmp_path / "bad.parquet"
    )
    with pytest.raises(ValueError, match="name nodes not in the graph"):
        load_graph_index(graph, ["c1"], tmp_path / "bad.parquet")
    with pytest.raises(FileNotFoundError, match="fixgraph linkpred"):
        load_graph_index(graph, ["c1"], tmp_path / "missing.parquet")
