"""Retrievers on a toy corpus; RRF against the formula worked by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fixgraph.retrieval.base import Hit, build_retriever, top_k
from fixgraph.retrieval.bm25 import Analyzer
from fixgraph.retrieval.hybrid import reciprocal_rank_fusion
from tests.unit.conftest import toy_chunks

TEXTS = {
    "a": "Reset the hub with a paper clip: hold the reset button.",
    "b": "The status light blinks amber when the router is out of reach.",
    "c": "Widgets drain their battery when the monitor app polls them.",
}
CHUNKS = toy_chunks(TEXTS)


def test_analyzer_stems_and_drops_stopwords() -> None:
    assert Analyzer()("The routers are Blinking") == ["router", "blink"]


def test_top_k_is_deterministic_on_ties() -> None:
    import numpy as np

    assert top_k(np.array([0.5, 0.9, 0.5, 0.9]), 3).tolist() == [1, 3, 0]


def test_rrf_matches_formula() -> None:
    one = [Hit("a", 9), Hit("b", 8)]
    two = [Hit("b", 0.9), Hit("c", 0.8)]
    fused = reciprocal_rank_fusion([one, two], k=60, depth=10)
    assert [h.chunk_id for h in fused] == ["b", "a", "c"]
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused[1].score == pytest.approx(1 / 61)
    assert fused[2].score == pytest.approx(1 / 62)


def test_rrf_tie_broken_by_best_rank() -> None:
    fused = reciprocal_rank_fusion([[Hit("x", 1), Hit("y", 1)], [Hit("y", 1), Hit("x", 1)]], k=2, depth=2)
    assert [h.chunk_id for h in fused] == ["x", "y"]


@pytest.mark.parametrize("kind", ["bm25", "dense", "hybrid"])
def test_retrievers_build_save_load_search(tmp_path: Path, kind: str) -> None:
    embedder = {"name": "hashing", "kind": "hashing", "dim": 256}
    bm25 = {"name": "bm25", "kind": "bm25", "k1": 0.9, "b": 0.4}
    dense = {"name": "dense", "kind": "dense", "embedder": embedder}
    cfg = {
        "bm25": bm25,
        "dense": dense,
        "hybrid": {"name": "hybrid", "kind": "hybrid", "rrf_k": 60, "channels": {"bm25": bm25, "dense": dense}},
    }[kind]
    build_retriever(cfg).build(CHUNKS, tmp_path / kind)
    retriever = build_retriever(cfg)
    retriever.load(CHUNKS, tmp_path / kind)
    assert retriever.search("amber light router", 2)[0].chunk_id == "b"
    assert retriever.search("paper clip reset", 1)[0].chunk_id == "a"


def test_loading_an_index_for_other_chunks_fails(tmp_path: Path) -> None:
    cfg = {"name": "bm25", "kind": "bm25"}
    build_retriever(cfg).build(CHUNKS, tmp_path)
    with pytest.raises(ValueError, match="built for other chunks"):
        build_retriever(cfg).load(CHUNKS[:2], tmp_path)


def test_embedding_cache_reuses_vectors(tmp_path: Path) -> None:
    from fixgraph.embedders.encoders import EmbeddingCache, HashingEmbedder

    class Counting(HashingEmbedder):
        calls = 0

        def embed_documents(self, texts):  # type: ignore[no-untyped-def]
            Counting.calls += len(texts)
            return super().embed_documents(texts)

    cache = EmbeddingCache(tmp_path)
    first = cache.embed(Counting(), ["x y", "z"])
    second = cache.embed(Counting(), ["z", "x y", "new"])
    assert Counting.calls == 3  # "x y", "z", then only "new"
    assert (second[1] == first[0]).all() and (second[0] == first[1]).all()


def test_embedding_cache_reads_once_and_keeps_other_writers_vectors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fixgraph.embedders.encoders import EmbeddingCache, HashingEmbedder

    embedder = HashingEmbedder()
    one, two = EmbeddingCache(tmp_path), EmbeddingCache(tmp_path)
    one.embed(embedder, ["a"])
    two.embed(embedder, ["a"])  # two reads the file now: it has "a"
    one.embed(embedder, ["b"])  # one writes "b" behind two's back
    two.embed(embedder, ["c"])  # two's write must not drop "b"
    assert len(EmbeddingCache(tmp_path).load(embedder)) == 3
    reads = 0
    real_load = np.load

    def counting_load(*args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal reads
        reads += 1
        return real_load(*args, **kwargs)

    monkeypatch.setattr(np, "load", counting_load)
    for _ in range(3):
        two.embed(embedder, ["a", "b", "c"])
    assert reads == 0  # nothing new: served from memory, file neither read nor written


HASHING = {"name": "hashing", "kind": "hashing", "dim": 256}


def test_hnsw_finds_the_exact_neighbours_on_a_small_corpus(tmp_path: Path) -> None:
    exact_cfg = {"name": "dense", "kind": "dense", "embedder": HASHING}
    hnsw_cfg = {**exact_cfg, "index": "hnsw", "hnsw": {"m": 8, "ef_construction": 40, "ef_search": 16}}
    results = []
    for name, cfg in (("exact", exact_cfg), ("hnsw", hnsw_cfg)):
        build_retriever(cfg).build(CHUNKS, tmp_path / name)
        retriever = build_retriever(cfg)
        retriever.load(CHUNKS, tmp_path / name)
        results.append(retriever.search("amber light router", 3))
    assert results[0][0].chunk_id == results[1][0].chunk_id == "b"
    # same neighbours with the same inner products (the two zero-score chunks may tie in either order)
    assert {h.chunk_id: h.score for h in results[0]} == pytest.approx(
        {h.chunk_id: h.score for h in results[1]}, abs=1e-5
    )
    assert (tmp_path / "hnsw" / "hnsw.faiss").exists()


def test_router_sends_natural_questions_to_dense_and_keywords_to_hybrid(tmp_path: Path) -> None:
    bm25 = {"name": "bm25", "kind": "bm25"}
    dense = {"name": "dense", "kind": "dense", "embedder": HASHING}
    hybrid = {"name": "hybrid", "kind": "hybrid", "channels": {"bm25": bm25, "dense": dense}}
    cfg = {
        "name": "router",
        "kind": "router",
        "systems": {"dense": dense, "hybrid": hybrid},
        "routes": {"lexical": "hybrid", "natural": "dense"},
    }
    build_retriever(cfg).build(CHUNKS, tmp_path)
    router = build_retriever(cfg)
    router.load(CHUNKS, tmp_path)
    router.search("amber light", 3)
    assert router.last_route == "hybrid"  # type: ignore[attr-defined]
    router.search("the little lamp on my router keeps flashing an orange colour at me all day", 3)
    assert router.last_route == "dense"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="routes"):
        build_retriever({**cfg, "routes": {"lexical": "nope", "natural": "dense"}})


def test_weighted_hybrid_needs_weights_for_its_channels() -> None:
    bm25 = {"name": "bm25", "kind": "bm25"}
    dense = {"name": "dense", "kind": "dense", "embedder": HASHING}
    base = {"name": "h", "kind": "hybrid", "fusion": "weighted", "channels": {"bm25": bm25, "dense": dense}}
    with pytest.raises(ValueError, match="needs `weights`"):
        build_retriever(base)
    with pytest.raises(ValueError, match="must name channels"):
        build_retriever({**base, "weights": {"bm25": 1.0}})


def test_block_weight_scores_a_chunk_by_its_own_vector_and_its_best_line(tmp_path: Path) -> None:
    from fixgraph.embedders.encoders import HashingEmbedder

    texts = {
        "long": "Open printer settings.\nCheck ink level.\nRestart spooler service now.\nClean print head.\n"
        "Align cartridges carefully.\nReplace paper tray.",
        "short": "Spooler service queue lists waiting jobs.",
    }
    chunks = toy_chunks(texts)
    heading_only = chunks[1].model_copy(update={"id": "head", "doc_id": "head", "title": "Spooler", "text": "Spooler"})
    chunks.append(heading_only)
    embedder_cfg = {"kind": "hashing", "name": "hashing", "dim": 256}
    query = "restart spooler service"
    embedder = HashingEmbedder(dim=256)
    q = embedder.embed_queries([query])[0]
    own = embedder.embed_documents([c.index_text() for c in chunks]) @ q
    best_line = [max(float(v @ q) for v in embedder.embed_documents(texts[c.id].split("\n"))) for c in chunks[:2]]
    scores = {}
    for weight in (0.0, 0.5):
        retriever = build_retriever({"kind": "dense", "name": "d", "embedder": embedder_cfg, "block_weight": weight})
        retriever.build(chunks, tmp_path / str(weight))
        retriever.load(chunks, tmp_path / str(weight))
        scores[weight] = retriever.scores(query)
    assert scores[0.0] == pytest.approx(own, abs=1e-6)
    expected = [0.5 * own[0] + 0.5 * best_line[0], 0.5 * own[1] + 0.5 * best_line[1], own[2]]  # no line: own
    assert scores[0.5] == pytest.approx(expected, abs=1e-6)
    assert own[1] > own[0] and expected[0] > expected[1]  # the long chunk's one matching step wins it the rank


def test_block_weight_must_be_a_share_and_needs_exact_search() -> None:
    embedder_cfg = {"kind": "hashing", "name": "hashing"}
    with pytest.raises(ValueError, match="block_weight must be in"):
        build_retriever({"kind": "dense", "name": "d", "embedder": embedder_cfg, "block_weight": 1.5})
    with pytest.raises(ValueError, match="needs index: exact"):
        build_retriever({"kind": "dense", "name": "d", "embedder": embedder_cfg, "block_weight": 0.5, "index": "hnsw"})
