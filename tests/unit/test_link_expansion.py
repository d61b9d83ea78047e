"""Article-link expansion on a hand-made corpus: scores checked against hand-computed cosines."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fixgraph.config import ConfigError, compose, to_dict
from fixgraph.corpus.linkgraph import build_link_graph, write_link_graph
from fixgraph.corpus.models import Document, Link
from fixgraph.corpus.store import write_documents
from fixgraph.embedders.encoders import HashingEmbedder
from fixgraph.retrieval.base import build_retriever
from fixgraph.retrieval.link_expansion import link_context
from tests.kg_helpers import chunk

CONDITIONAL = "If the printer is jammed, see Clear a paper jam."
PLAIN = "Read more about fonts and printing."
CHUNKS = [chunk(t, doc_id=d) for t, d in [("Printer problems", "d1"), ("Open the tray", "d2"), ("Fonts", "d3")]]
CHUNKS.append(chunk("Pull the paper out gently", doc_id="d2").model_copy(update={"id": "d2#_-1"}))
C1, C2, C3, C2B = (c.id for c in CHUNKS)


def _corpus(tmp_path: Path) -> tuple[Path, Path]:
    def doc(i: str, links: list[Link]) -> Document:
        return Document(id=i, title=f"Doc {i}", source="t", path="p", text="x", links=links)

    docs = [
        doc(
            "d1",
            [
                Link(target_doc="d2", link_type="inline", anchor_text="Clear a paper jam", sentence=CONDITIONAL),
                Link(target_doc="d3", link_type="inline", anchor_text="fonts", sentence=PLAIN),
                Link(target_doc="d3", link_type="guide"),
            ],
        ),
        doc("d2", []),
        doc("d3", []),
    ]
    documents, links = tmp_path / "documents.jsonl", tmp_path / "links.parquet"
    write_documents(documents, docs)
    rows, _, _ = build_link_graph(docs)
    write_link_graph(links, rows)
    return documents, links


def _retriever(tmp_path: Path, hits: Sequence[Sequence[Any]], **overrides: Any) -> Any:
    documents, links = _corpus(tmp_path)
    node = to_dict(compose(["retriever=link_expansion", f"paths.artifacts={tmp_path}"]).retriever)
    node.update(
        first_stage={"kind": "test_fixed_hits", "hits": hits},
        embedder={"kind": "hashing", "name": "hashing", "dim": 256, "model": "whitespace"},
        links=str(links),
        documents=str(documents),
        cache_dir=None,
        seed_pages=1,
        weight=0.5,
    )
    node.update(overrides)
    retriever = build_retriever(node)
    retriever.build(CHUNKS, tmp_path / "index")
    retriever.load(CHUNKS, tmp_path / "index")
    return retriever


def _cos(a: str, b: str) -> float:
    embedder = HashingEmbedder(dim=256)
    return float(embedder.embed_queries([a])[0] @ embedder.embed_documents([b])[0])


def test_link_context_prefers_the_condition_then_the_sentence() -> None:
    row = {"condition": "If the printer is jammed", "sentence": CONDITIONAL, "anchor_text": "Clear a paper jam"}
    assert link_context(row, "Title", "condition") == "If the printer is jammed"
    assert link_context(row, "Title", "sentence") == CONDITIONAL
    assert link_context(row, "Title", "anchor") == "Clear a paper jam"
    assert link_context({"condition": "", "sentence": "", "anchor_text": ""}, "Title", "condition") == "Title"


def test_linked_page_gains_weight_times_the_condition_match(tmp_path: Path) -> None:
    query = "my printer is jammed"
    retriever = _retriever(tmp_path, [[C1, 0.9], [C3, 0.6]])
    hits = {h.chunk_id: h.score for h in retriever.search(query, 10)}
    jam = _cos(query, "If the printer is jammed")  # the condition of d1 -> d2
    fonts = max(_cos(query, PLAIN), 0.0)  # d1 -> d3 (inline); the guide link has weight 0
    assert jam > 0.5
    # d2's two chunks were not returned by the first stage: they start from the list's floor (0.6)
    expected = {C1: 0.9, C2: 0.6 + 0.5 * jam, C2B: 0.6 + 0.5 * jam, C3: 0.6 + 0.5 * fonts}
    assert hits == pytest.approx(expected)
    assert retriever.trace(query)["seed_pages"] == ["d1"]


def test_only_seed_pages_expand_and_type_weights_scale(tmp_path: Path) -> None:
    query = "my printer is jammed"
    # d3 ranks first: it links nowhere, so with one seed page nothing moves
    still = _retriever(tmp_path, [[C3, 0.9], [C1, 0.8]])
    assert [h.chunk_id for h in still.search(query, 10)] == [C3, C1]
    halved = _retriever(tmp_path / "b", [[C1, 0.9], [C3, 0.6]], link_types={"inline": 0.5})
    score = {h.chunk_id: h.score for h in halved.search(query, 10)}[C2]
    assert score == pytest.approx(0.6 + 0.5 * 0.5 * _cos(query, "If the printer is jammed"))


def test_sentence_context_matches_the_whole_link_sentence(tmp_path: Path) -> None:
    query = "my printer is jammed"
    retriever = _retriever(tmp_path, [[C1, 0.9], [C3, 0.6]], context="sentence")
    score = {h.chunk_id: h.score for h in retriever.search(query, 10)}[C2]
    assert score == pytest.approx(0.6 + 0.5 * _cos(query, CONDITIONAL))
    assert not np.isclose(_cos(query, CONDITIONAL), _cos(query, "If the printer is jammed"))


def test_unknown_key_and_bad_context_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="hops"):
        _retriever(tmp_path, [[C1, 1.0]], hops=2)
    with pytest.raises(ValueError, match="context"):
        _retriever(tmp_path / "b", [[C1, 1.0]], context="title")


def test_a_dense_first_stage_with_the_same_embedder_embeds_the_question_once(tmp_path: Path) -> None:
    documents, links = _corpus(tmp_path)
    embedder = {"kind": "hashing", "name": "hashing", "dim": 256, "model": "whitespace"}
    node = to_dict(compose(["retriever=link_expansion", f"paths.artifacts={tmp_path}"]).retriever)
    node.update(
        first_stage={"kind": "dense", "name": "d", "embedder": embedder},
        embedder=embedder,
        links=str(links),
        documents=str(documents),
        cache_dir=None,
    )
    retriever = build_retriever(node)
    retriever.build(CHUNKS, tmp_path / "index")
    retriever.load(CHUNKS, tmp_path / "index")
    calls: list[Sequence[str]] = []
    embed = retriever.first_stage.embedder.embed_queries
    retriever.first_stage.embedder.embed_queries = lambda texts: calls.append(texts) or embed(texts)
    retriever.embedder.embed_queries = lambda texts: pytest.fail("the first stage's vector should be reused")
    hits = retriever.search("my printer is jammed", 4)
    assert len(calls) == 1 and hits


def test_backward_credits_only_the_chunk_holding_a_link_into_a_seed_page(tmp_path: Path) -> None:
    intro = "Printer problems happen. "
    text = intro + CONDITIONAL
    anchor = text.index("Clear a paper jam")
    source = [
        chunk(intro, doc_id="d1"),
        chunk(CONDITIONAL, doc_id="d1", start=len(intro)).model_copy(update={"id": "d1#_-1"}),
    ]
    docs = [
        Document(
            id="d1", title="Doc d1", source="t", path="p", text=text,
            links=[Link(target_doc="d2", link_type="inline", anchor_text="Clear a paper jam", sentence=CONDITIONAL,
                        start=anchor, end=anchor + len("Clear a paper jam"))],
        ),
        Document(id="d2", title="Doc d2", source="t", path="p", text="x"),
        Document(id="d3", title="Doc d3", source="t", path="p", text="x"),
    ]  # fmt: skip
    documents, links = tmp_path / "documents.jsonl", tmp_path / "links.parquet"
    write_documents(documents, docs)
    write_link_graph(links, build_link_graph(docs)[0])
    chunks = [*source, CHUNKS[1], CHUNKS[2]]
    node = to_dict(compose(["retriever=link_expansion", f"paths.artifacts={tmp_path}"]).retriever)
    node.update(
        first_stage={"kind": "test_fixed_hits", "hits": [[C2, 0.9], [C3, 0.5]]},
        embedder={"kind": "hashing", "name": "hashing", "dim": 256, "model": "whitespace"},
        links=str(links), documents=str(documents), cache_dir=None, seed_pages=1, weight=0.5,
    )  # fmt: skip
    query = "my printer is jammed"

    def scores(backward: float) -> dict[str, float]:
        retriever = build_retriever({**node, "backward": backward})
        retriever.build(chunks, tmp_path / "index")
        retriever.load(chunks, tmp_path / "index")
        return {h.chunk_id: h.score for h in retriever.search(query, 10)}

    assert scores(0.0) == pytest.approx({C2: 0.9, C3: 0.5})  # off by default: d1 links *into* the seed d2
    jam = _cos(query, "If the printer is jammed")
    # the chunk holding the link starts from the floor (0.5) and gains backward x match; d1's intro does not
    assert scores(0.4) == pytest.approx({C2: 0.9, C3: 0.5, "d1#_-1": 0.5 + 0.4 * jam})
    with pytest.raises(ValueError, match="backward"):
        build_retriever({**node, "backward": -0.1})
