"""Graph retrievers on a hand-made graph, checked against networkx PageRank and hand-computed scores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from fixgraph.config import compose, to_dict
from fixgraph.corpus.models import Document, Link
from fixgraph.corpus.store import write_documents
from fixgraph.embedders.encoders import HashingEmbedder
from fixgraph.io import write_json
from fixgraph.kg.store import EDGE_COLUMNS, MENTION_COLUMNS, NODE_COLUMNS, GraphStore
from fixgraph.retrieval.base import build_retriever
from fixgraph.retrieval.ppr import min_max
from tests.kg_helpers import chunk

CHUNKS = [
    chunk(t, doc_id=f"d{i}")
    for i, t in enumerate(
        [
            "Remove earbuds in Bluetooth settings.",
            "Bluetooth needs Settings.",
            "Open Settings to change things.",
            "Nothing to see here.",
        ],
        start=1,
    )
]
C1, C2, C3, C4 = (c.id for c in CHUNKS)

NODES = [  # id, type, name, chunks that mention it
    ("Concept||bluetooth", "Concept", "Bluetooth", [C1, C2]),
    ("Concept||earbud", "Concept", "earbuds", [C1]),
    ("App||settings", "App", "Settings", [C2, C3]),
    ("Problem|d1|earbuds stay paired", "Problem", "earbuds stay paired", [C1]),
    ("Fix|d1|remove the device", "Fix", "remove the device", [C1]),
    ("Concept||thing", "Concept", "things", [C3]),
]
EDGES = [  # source, relation, target, weight, chunks stating it
    ("Concept||bluetooth", "related_to", "Concept||earbud", 1.0, [C1]),
    ("Concept||bluetooth", "related_to", "App||settings", 2.0, [C2]),
    ("Problem|d1|earbuds stay paired", "fixed_by", "Fix|d1|remove the device", 1.0, [C1]),
    ("Fix|d1|remove the device", "uses", "App||settings", 1.0, [C3]),
    ("App||settings", "fixed_by", "Concept||thing", 1.0, [C4]),  # not allowed by the ontology
]


def _write_graph(folder: Path) -> None:
    nodes = pd.DataFrame(
        [
            {
                "node_id": n,
                "type": t,
                "scope": "",
                "name": name,
                "key": name.lower(),
                "aliases": [name],
                "n_mentions": len(cs),
                "n_chunks": len(cs),
                "community": 0,
            }
            for n, t, name, cs in NODES
        ],
        columns=NODE_COLUMNS,
    )
    edges = pd.DataFrame(
        [
            {
                "edge_id": f"e{i}",
                "source": s,
                "target": t,
                "relation": r,
                "weight": w,
                "n_chunks": 1,
                "extractors": ["test"],
                "basis": "text",
            }
            for i, (s, r, t, w, _) in enumerate(EDGES)
        ],
        columns=EDGE_COLUMNS,
    )

    def mention(record_id: str, role: str, node_id: str, edge_id: str, chunk_id: str) -> dict[str, object]:
        return {
            "record_id": record_id,
            "role": role,
            "node_id": node_id,
            "edge_id": edge_id,
            "chunk_id": chunk_id,
            "doc_id": chunk_id.split("#")[0],
            "start": 0,
            "end": 1,
            "evidence": "x",
            "extractor": "test",
            "model": "",
            "prompt_version": "",
            "extracted_at": "",
            "basis": "text",
        }

    rows = [mention(f"n{i}{c}", "entity", n, "", c) for i, (n, _, _, cs) in enumerate(NODES) for c in cs]
    rows += [mention(f"e{i}{c}", "relation", "", f"e{i}", c) for i, e in enumerate(EDGES) for c in e[4]]
    GraphStore(
        nodes=nodes, edges=edges, mentions=pd.DataFrame(rows, columns=MENTION_COLUMNS), report={"nodes": len(nodes)}
    ).write(folder)
    embedder = HashingEmbedder(dim=64)
    np.save(folder / "node_vectors.npy", embedder.embed_documents([n[2] for n in NODES]))
    write_json(folder / "node_vectors.json", {"embedder": embedder.identity(), "node_ids": [n[0] for n in NODES]})


def _retriever(tmp_path: Path, option: str, **overrides: Any) -> Any:
    graph = tmp_path / "graph"
    if not graph.exists():
        _write_graph(graph)
    cfg = compose([f"retriever={option}", "embedder=hashing", "embedder.dim=64", f"paths.artifacts={tmp_path}"])
    node = to_dict(cfg.retriever)
    if "graph_dir" in node:  # entity-graph retrievers (PPR, typed paths)
        node.update(graph_dir=str(graph), synonym_threshold=2.0)  # no synonymy edges: compare the stored graph
        node["linking"] = {**node.get("linking", {}), "min_similarity": 1.01, "query_phrases": False}  # names only
    node.update(overrides)
    retriever = build_retriever(node)
    retriever.build(CHUNKS, tmp_path / option)
    retriever.load(CHUNKS, tmp_path / option)
    return retriever


def _reference_graph(passages: bool = False) -> nx.MultiGraph:
    g = nx.MultiGraph()
    g.add_nodes_from(n for n, *_ in NODES)
    for s, _, t, w, _ in EDGES:
        g.add_edge(s, t, weight=w)
    if passages:
        for c in CHUNKS:
            g.add_node(f"chunk|{c.id}")
        for n, _, _, cs in NODES:
            for c in cs:
                g.add_edge(f"chunk|{c}", n, weight=1.0)
    return g


QUERY = "How do I remove earbuds from Bluetooth?"


def test_hipporag1_scores_passages_by_the_ppr_mass_of_their_phrases(tmp_path: Path) -> None:
    retriever = _retriever(tmp_path, "ppr_hipporag1")
    hits = retriever.search(QUERY, 10)
    seeds = {s["name"]: s["score"] for s in retriever.trace(QUERY)["seeds"]}
    assert seeds == {"Bluetooth": 1.0, "earbuds": 1.0}
    # reset: linking score x specificity 1/|P_i| (Bluetooth is in 2 chunks, earbuds in 1)
    reset = {n: 0.0 for n, *_ in NODES} | {"Concept||bluetooth": 0.5, "Concept||earbud": 1.0}
    mass = nx.pagerank(_reference_graph(), alpha=0.5, personalization=reset, weight="weight", tol=1e-13)
    expected = {c.id: sum(mass[n] for n, _, _, cs in NODES if c.id in cs) for c in CHUNKS}
    assert [h.chunk_id for h in hits] == sorted((c for c in expected if expected[c] > 0), key=lambda c: -expected[c])
    assert {h.chunk_id: h.score for h in hits} == pytest.approx({c: v for c, v in expected.items() if v > 0}, abs=1e-6)
    assert retriever.search("unrelated words only", 10) == []  # no seed, no graph answer


def test_hipporag2_puts_passages_in_the_graph_with_dense_reset_weights(tmp_path: Path) -> None:
    retriever = _retriever(tmp_path, "ppr_hipporag2")
    hits = retriever.search(QUERY, 10)
    dense = np.asarray(retriever.first_stage.scores(QUERY), dtype=float)
    reset = {n: 0.0 for n, *_ in NODES} | {"Concept||bluetooth": 0.5, "Concept||earbud": 1.0}
    reset |= {f"chunk|{c.id}": 0.05 * s for c, s in zip(CHUNKS, min_max(dense), strict=True)}
    mass = nx.pagerank(_reference_graph(passages=True), alpha=0.5, personalization=reset, weight="weight", tol=1e-13)
    expected = {c.id: mass[f"chunk|{c.id}"] for c in CHUNKS}
    assert len(hits) == 4  # every chunk is a passage node, C4 reachable through its dense reset weight
    assert {h.chunk_id: h.score for h in hits} == pytest.approx(expected, abs=1e-6)
    assert [h.chunk_id for h in hits] == sorted(expected, key=lambda c: -expected[c])


def test_typed_paths_follow_only_schema_valid_hops(tmp_path: Path) -> None:
    retriever = _retriever(tmp_path, "typed_paths", relations=["fixed_by", "uses"])
    hits = retriever.search("my earbuds stay paired", 10)
    # seed "earbuds stay paired" (1.0, only in C1) -> fixed_by "remove the device" (0.5, stated in C1)
    # -> uses "Settings" (0.25, stated in C3) -> fixed_by "things" is not allowed (App -fixed_by-> Concept): C4 = 0
    # ("earbuds" also matches by name: 1.0 in C1; its only edge is related_to, which is not followed)
    assert {h.chunk_id: h.score for h in hits} == pytest.approx({C1: 1.0 + 1.0 + 0.5, C3: 0.25})
    paths = retriever.trace("my earbuds stay paired")["paths"]
    assert paths[0]["relations"] == ["fixed_by"] and ["fixed_by", "uses"] in [p["relations"] for p in paths]
    one_hop = _retriever(tmp_path, "typed_paths", relations=["fixed_by", "uses"], max_hops=1)
    assert {h.chunk_id for h in one_hop.search("my earbuds stay paired", 10)} == {C1}


def _docs(tmp_path: Path) -> Path:
    def doc(i: int, links: list[tuple[str, str]]) -> Document:
        return Document(
            id=f"d{i}",
            title=f"Doc {i}",
            source="t",
            path="p",
            text="x",
            links=[Link(target_doc=t, link_type=lt) for t, lt in links],
        )

    docs = [doc(1, [("d3", "inline")]), doc(2, [("d3", "seealso")]), doc(3, []), doc(4, [])]
    path = tmp_path / "documents.jsonl"
    write_documents(path, docs)
    return path


def test_link_prior_lifts_the_page_the_other_top_hits_link_to(tmp_path: Path) -> None:
    channel = {"kind": "test_fixed_hits", "hits": [[C1, 3.0], [C2, 2.0], [C3, 1.0], [C4, 0.5]]}
    retriever = _retriever(
        tmp_path, "link_prior", first_stage=channel, documents=str(_docs(tmp_path)), rerank_depth=3, weight=0.8
    )
    hits = retriever.search("q", 4)
    # top-3 min-max: C1 1, C2 0.5, C3 0; pages d1 1, d2 0.5, d3 0 (sum 1.5); d3 is linked from d1 and d2:
    # C3 = 0 + 0.8 x (1 + 0.5) / 1.5 = 0.8 > C2 = 0.5 + 0 (d2's only link is to d3, worth 0); C4 stays last
    assert [h.chunk_id for h in hits] == [C1, C3, C2, C4]


def test_article_links_reach_linked_pages_and_mix_scores(tmp_path: Path) -> None:
    docs = str(_docs(tmp_path))
    channel = {"kind": "test_fixed_hits", "hits": [[C1, 3.0], [C4, 1.0]]}
    only_first = _retriever(tmp_path, "article_links", first_stage=channel, documents=docs, mix=0.0)
    assert [h.chunk_id for h in only_first.search("q", 2)] == [C1, C4]
    only_links = _retriever(tmp_path, "article_links", first_stage=channel, documents=docs, mix=1.0)
    ranked = [h.chunk_id for h in only_links.search("q", 4)]
    # pages seeded 1/rank (d1: 1, d4: 1/2); d3 is reached through d1's link, d2 through d3
    g = nx.Graph()
    g.add_nodes_from(["d1", "d2", "d3", "d4"])
    g.add_weighted_edges_from([("d1", "d3", 1.0), ("d2", "d3", 1.0)])
    mass = nx.pagerank(g, alpha=0.5, personalization={"d1": 1.0, "d2": 0, "d3": 0, "d4": 0.5}, weight="weight")
    assert ranked == [f"{d}#_-0" for d in sorted(mass, key=lambda d: -mass[d])]
    assert C3 in ranked  # a chunk the first stage never returned


def test_entity_linking_by_alias_and_by_embedding(tmp_path: Path) -> None:
    from fixgraph.kg.ontology import build_ontology
    from fixgraph.retrieval.entity_linking import EntityLinker
    from fixgraph.retrieval.graph_index import load_graph_index

    _write_graph(tmp_path / "graph")
    index = load_graph_index(tmp_path / "graph", [c.id for c in CHUNKS])
    ontology = build_ontology(compose([]).ontology)  # aliases: Settings <- "GNOME Settings", "Control Center"
    by_alias = EntityLinker(index, None, ontology).link("Where is the Control Center on my laptop?")
    assert [(s.name, s.how, s.score) for s in by_alias] == [("Settings", "alias", 1.0)]
    embedder = HashingEmbedder(dim=64)
    by_vector = EntityLinker(index, embedder, None, top_k=1, min_similarity=0.5, query_phrases=False)
    (seed,) = by_vector.link("things")  # one word: its hashed vector equals the node name's
    assert (seed.name, seed.how) == ("things", "name")
    (seed,) = by_vector.link("device remove")  # no name matches; the hashed bags of words are close
    assert (seed.name, seed.how) == ("remove the device", "embedding")
    assert seed.score == pytest.approx(2 / np.sqrt(6), abs=1e-6)  # cosine of {device, remove} vs {remove, the, device}
    with pytest.raises(ValueError, match="another embedder"):
        EntityLinker(index, HashingEmbedder(dim=32), None)


def test_hipporag2_seeds_passages_from_any_first_stage(tmp_path: Path) -> None:
    # a first stage without full score vectors seeds its top hits, scaled by ppr.min_max (whose floor is
    # 0: 4 -> 1, 2 -> 0.5) into (0, 1]: x 0.999 + 0.001; chunks it did not return get 0
    channel = {"kind": "test_fixed_hits", "hits": [[C3, 4.0], [C1, 2.0]]}
    retriever = _retriever(tmp_path, "ppr_hipporag2", first_stage=channel)
    seeded = [0.5 * 0.999 + 0.001, 0.0, 1.0, 0.0]
    assert retriever.passage_scores(QUERY) == pytest.approx(seeded)
    hits = retriever.search(QUERY, 10)
    reset = {n: 0.0 for n, *_ in NODES} | {"Concept||bluetooth": 0.5, "Concept||earbud": 1.0}
    reset |= {f"chunk|{c.id}": 0.05 * s for c, s in zip(CHUNKS, seeded, strict=True)}
    mass = nx.pagerank(_reference_graph(passages=True), alpha=0.5, personalization=reset, weight="weight", tol=1e-13)
    assert {h.chunk_id: h.score for h in hits} == pytest.approx({c.id: mass[f"chunk|{c.id}"] for c in CHUNKS}, abs=1e-6)
