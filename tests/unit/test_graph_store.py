"""Graph store: parquet round trip with provenance, igraph/networkx loaders, Neo4j export, Leiden."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from fixgraph.config import compose
from fixgraph.kg.communities import CommunityConfig, community_table, leiden_communities
from fixgraph.kg.loaders import passage_node, to_igraph, to_networkx
from fixgraph.kg.neo4j import export_csv, export_cypher
from fixgraph.kg.ontology import build_ontology
from fixgraph.kg.resolve import ResolutionConfig, mentions_of, resolve
from fixgraph.kg.store import GraphStore, assemble_store
from tests.kg_helpers import chunk, record

A = chunk("If the printer is offline, restart the computer. Open Settings.", doc_id="printing")
B = chunk("Restart the computer if Wi-Fi drops. Open Settings.", doc_id="wifi")


def _store() -> GraphStore:
    records = [
        record("the printer is offline", "Cause", A),
        record("restart the computer", "Fix", A),
        record(
            "the printer is offline",
            "Cause",
            A,
            evidence="If the printer is offline, restart the computer.",
            relation="fixed_by",
            object="restart the computer",
            object_type="Fix",
        ),
        record("Settings", "App", A),
        record("Restart the computer", "Fix", B),
        record("Settings", "App", B),
        record(
            "Restart the computer",
            "Fix",
            B,
            evidence="Restart the computer if Wi-Fi drops. Open Settings.",
            relation="uses",
            object="Settings",
            object_type="App",
        ),
        record("Settings", "App", B),  # the very same record again: stored once
    ]
    ontology = build_ontology(compose([]).ontology)
    return assemble_store(records, resolve(mentions_of(records), ontology, ResolutionConfig(embedding=False)), [])


def test_store_traces_every_node_and_edge_to_spans(tmp_path: Path) -> None:
    store = _store()
    store.write(tmp_path)
    back = GraphStore.read(tmp_path)
    assert sorted(back.nodes["node_id"]) == [
        "App||settings",
        "Cause|printing|printer is offline",
        "Fix|printing|restart the computer",
        "Fix|wifi|restart the computer",
    ]
    assert set(back.edges["relation"]) == {"fixed_by", "uses"}
    settings = back.nodes.set_index("node_id").loc["App||settings"]
    assert (settings["n_mentions"], settings["n_chunks"]) == (2, 2)
    relation_rows = back.mentions[back.mentions["role"] == "relation"]
    assert set(relation_rows["edge_id"]) == set(back.edges["edge_id"])
    row = relation_rows[relation_rows["doc_id"] == "printing"].iloc[0]
    assert A.text[row["start"] : row["end"]] == row["evidence"]
    assert back.node_chunks()["App||settings"] == {A.id, B.id}
    with pytest.raises(FileNotFoundError, match="fixgraph graph"):
        GraphStore.read(tmp_path / "missing")


def test_igraph_and_networkx_loaders_agree() -> None:
    store = _store()
    ig_graph = to_igraph(store, passages=[A.id, B.id, "lonely#_-0"])
    nx_graph = to_networkx(store, passages=[A.id, B.id, "lonely#_-0"])
    assert ig_graph.vcount() == nx_graph.number_of_nodes() == 4 + 3
    assert ig_graph.ecount() == nx_graph.number_of_edges()
    ig_edges = sorted(
        (*sorted((ig_graph.vs[e.source]["name"], ig_graph.vs[e.target]["name"])), e["weight"]) for e in ig_graph.es
    )
    nx_edges = sorted((*sorted((u, v)), d["weight"]) for u, v, d in nx_graph.edges(data=True))
    assert ig_edges == nx_edges
    assert nx_graph.degree(passage_node("lonely#_-0")) == 0  # a chunk without mentions stays isolated
    assert nx_graph.has_edge(passage_node(A.id), "App||settings")


def test_neo4j_csv_and_cypher(tmp_path: Path) -> None:
    store = _store()
    store.nodes.loc[0, "name"] = 'He said "hi", then left'  # quotes and commas must survive
    nodes_csv, rels_csv, _ = export_csv(store, tmp_path / "neo4j")
    with open(nodes_csv, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["nodeId:ID", "name", "type", "scope", "community:int", "n_mentions:int", ":LABEL"]
    assert rows[1][1] == 'He said "hi", then left' and rows[1][6] == "Entity;App"
    with open(rels_csv, newline="") as fh:
        rels = list(csv.DictReader(fh))
    assert {r[":TYPE"] for r in rels} == {"FIXED_BY", "USES"}
    assert {r[":START_ID"] for r in rels} <= set(store.nodes["node_id"])
    script = export_cypher(store, tmp_path / "graph.cypher").read_text()
    assert 'n.name = "He said \\"hi\\", then left"' in script
    assert script.count("MERGE (a)-[r:") == 2


def test_leiden_separates_two_cliques_joined_by_one_edge() -> None:
    nodes = pd.DataFrame(
        {
            "node_id": [f"a{i}" for i in range(4)] + [f"b{i}" for i in range(4)] + ["alone"],
            "name": [*list("abcdefgh"), "z"],
            "type": "Concept",
            "n_mentions": 1,
        }
    )
    pairs = [(f"{g}{i}", f"{g}{j}") for g in "ab" for i in range(4) for j in range(i + 1, 4)] + [("a0", "b0")]
    edges = pd.DataFrame(
        {"source": [p[0] for p in pairs], "target": [p[1] for p in pairs], "weight": 1.0, "relation": "related_to"}
    )
    membership, modularity = leiden_communities(nodes, edges, CommunityConfig(seed=1))
    assert len({membership[f"a{i}"] for i in range(4)}) == 1 and len({membership[f"b{i}"] for i in range(4)}) == 1
    assert membership["a0"] != membership["b0"]
    assert membership["alone"] not in {membership["a0"], membership["b0"]}
    # modularity of the two-clique split, by hand: m = 13, each side has 6 inner edges and degree sum 13
    assert modularity == pytest.approx(2 * (6 / 13 - (13 / 26) ** 2), abs=1e-6)
    table = community_table(nodes.assign(community=nodes["node_id"].map(membership)), membership)
    assert sorted(table["size"]) == [1, 4, 4]
