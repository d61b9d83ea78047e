"""LLM relevance reranker (with the fake LLM), the reranked retriever, the router and the paired test."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from fixgraph.retrieval.base import Hit, build_retriever
from fixgraph.retrieval.llm_rerank import LLMReranker, yes_probability
from fixgraph.retrieval.rerank import rerank_top
from fixgraph.retrieval.router import classify_query
from tests.unit.test_retrieval import CHUNKS

FAKE = {"name": "fake", "kind": "fake", "default": "no", "responses": {"paper clip": "Yes."}}


def test_llm_reranker_moves_yes_passages_up() -> None:
    reranker = LLMReranker(llm=FAKE, top_n=3)
    hits = [Hit("b", 3.0), Hit("c", 2.0), Hit("a", 1.0)]
    texts = {c.id: c.text for c in CHUNKS}
    ranked = reranker.rerank("how to reset", hits, texts)
    assert [h.chunk_id for h in ranked] == ["a", "b", "c"]  # only a mentions a paper clip
    assert [h.score for h in ranked] == [1.0, 0.0, 0.0]
    prompt = reranker.llm.backend.requests[0]["prompt"]  # type: ignore[attr-defined]
    assert "how to reset" in prompt and texts["b"] in prompt


def test_rerank_top_keeps_scores_monotone_across_the_unscored_tail() -> None:
    # first stage on a cosine scale, reranker on a z scale: the tail must not outscore the head
    hits = [Hit("a", 0.9), Hit("b", 0.8), Hit("c", 0.7), Hit("d", 0.5)]
    ranked = rerank_top(np.array([-1.0, 1.0]), hits, top_n=2)
    assert [h.chunk_id for h in ranked] == ["b", "a", "c", "d"]
    scores = [h.score for h in ranked]
    assert scores[:2] == [1.0, -1.0] and scores == sorted(scores, reverse=True)
    assert scores[2] < -1.0 and scores[2] - scores[3] == pytest.approx(0.2)  # the tail keeps its gaps
    assert rerank_top(np.array([2.0, 1.0]), hits[:2], top_n=2) == [Hit("a", 2.0), Hit("b", 1.0)]


@dataclass
class _WithLogprobs:
    text: str
    top_logprobs: dict[str, float]


def test_yes_probability_from_logprobs() -> None:
    completion = _WithLogprobs("no", {" Yes": np.log(0.6), "No": np.log(0.2), "Maybe": np.log(0.2)})
    assert yes_probability(completion) == pytest.approx(0.75)  # 0.6 / (0.6 + 0.2), text ignored


def test_reranked_retriever_reorders_first_stage(tmp_path: Path) -> None:
    cfg = {
        "name": "bm25_llm",
        "kind": "reranked",
        "first_stage": {"name": "bm25", "kind": "bm25"},
        "reranker": {"name": "llm", "kind": "llm", "llm": {**FAKE, "responses": {"status light": "yes"}}, "top_n": 2},
    }
    build_retriever(cfg).build(CHUNKS, tmp_path)
    retriever = build_retriever(cfg)
    retriever.load(CHUNKS, tmp_path)
    first = build_retriever(cfg["first_stage"])
    first.load(CHUNKS, tmp_path)  # the system keeps its first stage's index in its own folder
    query = "reset hub router light"
    assert [h.chunk_id for h in first.search(query, 3)][:2] == ["a", "b"]
    assert [h.chunk_id for h in retriever.search(query, 3)][:2] == ["b", "a"]
    assert {"first_stage_ms", "rerank_ms"} <= set(retriever.last_timings)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("query", "kind"),
    [
        ("bluetooth", "lexical"),
        ("wifi password reset", "lexical"),
        ('my laptop says "authentication required" when I connect to the network at work', "lexical"),
        ("how do I run nautilus --quit from a terminal when the file manager hangs", "lexical"),
        ("Gave my old wireless earbuds to my sister and they keep connecting, how do I stop it", "natural"),
    ],
)
def test_router_rules(query: str, kind: str) -> None:
    assert classify_query(query) == kind


def test_bi_encoder_reranker_reads_cached_vectors_and_embeds_only_the_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fixgraph.embedders.encoders import EmbeddingCache, HashingEmbedder
    from fixgraph.retrieval.bi_encoder_rerank import BiEncoderReranker

    embedder_cfg = {"name": "hashing", "kind": "hashing", "dim": 256}
    texts = {c.id: c.text for c in CHUNKS}
    EmbeddingCache(tmp_path).embed(HashingEmbedder(dim=256), [texts["a"], texts["b"]])  # as a dense index does
    reranker = BiEncoderReranker(embedder=embedder_cfg, cache_dir=str(tmp_path), top_n=3)
    embedded: list[str] = []
    original = HashingEmbedder.embed_documents
    monkeypatch.setattr(
        HashingEmbedder, "embed_documents", lambda self, batch: embedded.extend(batch) or original(self, batch)
    )
    hits = [Hit("a", 3.0), Hit("b", 2.0), Hit("c", 1.0)]
    ranked = reranker.rerank("the router light is amber", hits, texts)
    assert embedded == [texts["c"]]  # a and b came from the cache
    oracle = HashingEmbedder(dim=256)  # cosine of the query with each passage, computed directly
    expected = (
        original(oracle, [texts[h.chunk_id] for h in hits]) @ oracle.embed_queries(["the router light is amber"])[0]
    )
    assert [h.chunk_id for h in ranked] == [hits[i].chunk_id for i in np.argsort(-expected, kind="stable")]
    assert [h.score for h in ranked] == pytest.approx(sorted(expected, reverse=True))
    reranker.rerank("reset the hub", hits, texts)
    assert embedded == [texts["c"]]  # embedded once, then kept


def test_bi_encoder_reranker_needs_an_embedder() -> None:
    from fixgraph.retrieval.bi_encoder_rerank import BiEncoderReranker

    with pytest.raises(ValueError, match="reranker mpnet: needs an `embedder` config"):
        BiEncoderReranker(name="mpnet")


def test_reranked_retriever_prepares_bi_encoder_vectors_on_load(tmp_path: Path) -> None:
    reranked = {
        "name": "bm25_bi",
        "kind": "reranked",
        "first_stage": {"name": "bm25", "kind": "bm25"},
        "reranker": {
            "name": "bi",
            "kind": "bi_encoder",
            "embedder": {"name": "hashing", "kind": "hashing", "dim": 128},
            "cache_dir": str(tmp_path / "cache"),
        },
    }
    build_retriever(reranked).build(CHUNKS, tmp_path / "index")
    retriever = build_retriever(reranked)
    retriever.load(CHUNKS, tmp_path / "index")
    assert len(retriever.reranker._vectors) == len(CHUNKS)  # type: ignore[attr-defined]
    assert retriever.search("reset the hub paper clip", 1)[0].chunk_id == "a"
