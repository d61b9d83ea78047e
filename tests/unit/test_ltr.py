"""The learned ranker (retrieval/ltr.py) on the hand-made link corpus of test_link_expansion: every
signal against a value worked out from the embedder and the corpus, and the score as weights x signals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixgraph.embedders.encoders import HashingEmbedder
from fixgraph.retrieval.base import RecentTraces, build_retriever
from fixgraph.retrieval.ltr import SIGNALS
from tests.unit.test_link_expansion import C1, C2, C2B, C3, CHUNKS, PLAIN, _corpus

EMBEDDER = {"kind": "hashing", "name": "hashing", "dim": 256, "model": "whitespace"}
QUERY = "my printer is jammed"
ONLY = {s: 0.0 for s in SIGNALS}


def _ltr(tmp_path: Path, weights: dict[str, float], linked: bool = True, **overrides: Any) -> Any:
    documents, links = _corpus(tmp_path)
    dense = {"kind": "dense", "name": "dense", "embedder": EMBEDDER}
    expansion = {
        "kind": "link_expansion", "name": "le", "first_stage": dense, "embedder": EMBEDDER, "links": str(links),
        "documents": str(documents), "seed_pages": 1, "weight": 0.5,
    }  # fmt: skip
    node = {
        "kind": "ltr",
        "name": "ltr",
        "first_stage": expansion if linked else dense,
        "lexical": {"kind": "bm25", "name": "bm25"},
        "weights": weights,
        **overrides,
    }
    retriever = build_retriever(node)
    retriever.build(CHUNKS, tmp_path / "index")
    retriever.load(CHUNKS, tmp_path / "index")
    return retriever


def _cos(query: str, text: str) -> float:
    embedder = HashingEmbedder(dim=256)
    return float(embedder.embed_queries([query])[0] @ embedder.embed_documents([text])[0])


def test_every_signal_matches_the_corpus(tmp_path: Path) -> None:
    retriever = _ltr(tmp_path, {"own": 1.0})
    hits, matrix = retriever.signals(QUERY)
    rows = {h.chunk_id: dict(zip(SIGNALS, row, strict=True)) for h, row in zip(hits, matrix, strict=True)}
    assert set(rows) == {C1, C2, C3, C2B}
    own = {c.id: _cos(QUERY, c.index_text()) for c in CHUNKS}
    assert max(own, key=lambda c: own[c]) == C1  # "Printer problems": d1 is the seed page
    jam, fonts = _cos(QUERY, "If the printer is jammed"), max(_cos(QUERY, PLAIN), 0.0)
    for c in CHUNKS:
        assert rows[c.id]["own"] == pytest.approx(own[c.id], abs=1e-6)
        assert rows[c.id]["line"] == pytest.approx(_cos(QUERY, f"Title\n{c.text}"), abs=1e-6)  # one line, in context
        assert rows[c.id]["log_tokens"] == pytest.approx(np.log1p(c.n_tokens))
    # d1 links to d2 (the condition matches) and d3; nothing links to d1
    assert [rows[c]["reach"] for c in (C1, C2, C2B, C3)] == pytest.approx([0.0, jam, jam, fonts], abs=1e-6)
    # seed or not, the links into a page give it its anchor match (d1 is the only linking page here)
    assert [rows[c]["anchor"] for c in (C1, C2, C2B, C3)] == pytest.approx([0.0, jam, jam, fonts], abs=1e-6)
    # BM25 relative to the question's best: only "Printer problems" shares a term ("printer")
    assert [rows[c]["bm25"] for c in (C1, C2, C2B, C3)] == pytest.approx([1.0, 0.0, 0.0, 0.0])
    page = {"d1": own[C1], "d2": max(own[C2], own[C2B]), "d3": own[C3]}
    order = sorted(page, key=lambda p: -page[p])
    for cid, doc in ((C1, "d1"), (C2, "d2"), (C2B, "d2"), (C3, "d3")):
        assert rows[cid]["page_best"] == pytest.approx(page[doc] - own[C1], abs=1e-6)
        assert rows[cid]["page_rank"] == pytest.approx(1 / (order.index(doc) + 1))


def test_anchor_counts_links_from_pages_that_do_not_rank(tmp_path: Path) -> None:
    query = "fonts jammed"  # "Fonts" (d3) ranks first and links nowhere: nothing is reached
    hits, matrix = _ltr(tmp_path, {"own": 1.0}).signals(query)
    rows = {h.chunk_id: dict(zip(SIGNALS, row, strict=True)) for h, row in zip(hits, matrix, strict=True)}
    assert hits[0].chunk_id == C3 and not any(r["reach"] for r in rows.values())
    # d1's "If the printer is jammed" still names d2 in the question's words
    jam = _cos(query, "If the printer is jammed")
    assert jam > 0.3 and rows[C2]["anchor"] == pytest.approx(jam, abs=1e-6)


def test_the_score_is_weights_times_signals(tmp_path: Path) -> None:
    weights = {"own": 2.0, "anchor": 3.0, "log_tokens": -0.5}
    retriever = _ltr(tmp_path, weights)
    hits, matrix = retriever.signals(QUERY)
    vector = [weights.get(s, 0.0) for s in SIGNALS]
    expected = {h.chunk_id: float(row @ vector) for h, row in zip(hits, matrix, strict=True)}
    ranked = retriever.search(QUERY, 10)
    assert {h.chunk_id: h.score for h in ranked} == pytest.approx(expected)
    assert [h.chunk_id for h in ranked] == sorted(expected, key=lambda c: (-expected[c], c))
    # the trace breaks each top hit's score into its weighted signals, in ranking order
    trace = retriever.trace(QUERY)
    assert trace["seed_pages"] == ["d1"]  # the link expansion's own trace comes along
    assert [t["chunk"] for t in trace["terms"]] == [h.chunk_id for h in ranked]
    by_chunk = {h.chunk_id: row for h, row in zip(hits, matrix, strict=True)}
    for term in trace["terms"]:
        assert set(term) == {"chunk", "score", *weights}  # signals with weight 0 are left out
        assert term["anchor"] == pytest.approx(3.0 * by_chunk[term["chunk"]][SIGNALS.index("anchor")], abs=1e-4)
        assert sum(term[s] for s in weights) == pytest.approx(term["score"], abs=1e-3)
    reverse = _ltr(tmp_path / "r", {"own": -1.0})  # a ranking unlike the first stage's
    backwards = [h.chunk_id for h in reverse.search(QUERY, 10)]
    assert backwards != [h.chunk_id for h in reverse.signals(QUERY)[0]]
    assert [t["chunk"] for t in reverse.trace(QUERY)["terms"]] == backwards
    # the anchor weight alone puts the page the conditional link leads to first
    anchored = [h.chunk_id for h in _ltr(tmp_path / "a", {**ONLY, "anchor": 1.0}).search(QUERY, 2)]
    assert sorted(anchored) == sorted([C2, C2B])


def test_without_link_expansion_graph_signals_are_refused_and_zero(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="reach need a link_expansion first stage"):
        _ltr(tmp_path, {"own": 1.0, "reach": 0.5}, linked=False)
    text = _ltr(tmp_path / "t", {"own": 1.0, "bm25": 0.5}, linked=False)
    hits, matrix = text.signals(QUERY)
    assert len(hits) == len(CHUNKS)
    assert not matrix[:, [SIGNALS.index("reach"), SIGNALS.index("anchor")]].any()


def test_weights_must_name_signals(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown: \\['pagerank'\\]"):
        _ltr(tmp_path, {"own": 1.0, "pagerank": 1.0})
    with pytest.raises(ValueError, match="none given"):
        _ltr(tmp_path / "b", {})
    with pytest.raises(ValueError, match="must be dense"):
        build_retriever(
            {"kind": "ltr", "name": "x", "first_stage": {"kind": "bm25", "name": "b"},
             "lexical": {"kind": "bm25", "name": "b"}, "weights": {"own": 1.0}}
        )  # fmt: skip


def test_traces_are_kept_for_recent_queries_only(tmp_path: Path) -> None:
    recent = RecentTraces(size=2)
    recent["a"], recent["b"] = 1, 2
    recent["a"] = 3  # asked again: the newest now
    recent["c"] = 4
    assert dict(recent) == {"a": 3, "c": 4}
    retriever = _ltr(tmp_path, {"own": 1.0, "reach": 1.0})
    assert retriever.traces.size == retriever.first_stage.traces.size == 256  # what a service keeps
    retriever.traces.size = retriever.first_stage.traces.size = 3
    queries = [f"printer jammed {n}" for n in range(5)]
    for query in queries:
        retriever.search(query, 2)
    assert list(retriever.traces) == list(retriever.first_stage.traces) == queries[2:]
    assert retriever.trace(queries[-1])["terms"] and retriever.trace(queries[0]) == {"terms": []}
