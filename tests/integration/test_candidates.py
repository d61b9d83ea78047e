"""Candidate cache on the fixture corpus: re-scoring equals live retrieval, stale caches are refused."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from omegaconf import DictConfig

from fixgraph.config import to_dict
from fixgraph.evaluation.splits import build_split
from fixgraph.pipeline import stages
from fixgraph.pipeline.candidate_cache import StaleCacheError
from fixgraph.pipeline.candidates import build_candidates, open_cache
from fixgraph.pipeline.rescore import RescoreParams, rescore
from fixgraph.retrieval.base import build_retriever

FAKE_LLM = "{name:fake,kind:fake,default:no,responses:{amber:yes,paper:yes}}"
SCORER = [
    "~candidates.scorers.cross_encoder",
    f"+candidates.scorers.llm={{name:llm,kind:llm,top_n:5,llm:{FAKE_LLM}}}",
    "candidates.score_depth=100",
]


@pytest.fixture
def cfg(fixture_config: Callable[..., DictConfig]) -> DictConfig:
    return fixture_config(["tracking.enabled=false", *SCORER])


def _live(cfg: DictConfig, node: dict) -> dict[str, list[str]]:  # type: ignore[type-arg]
    chunks = stages.load_chunks(cfg)
    result = stages.index(cfg, "hybrid", cfg.systems.hybrid, chunks)
    retriever = build_retriever(node)
    retriever.load(chunks, result.output)  # same channels as the hybrid system: its index serves every fusion
    return {q.qid: [h.chunk_id for h in retriever.search(q.question, 100)] for q in build_split(cfg.split).load()}


def test_rescoring_reproduces_live_fusion(cfg: DictConfig) -> None:
    cache = build_candidates(cfg)
    assert cache.channels == ["bm25", "dense"] and cache.scorers == ["llm"]
    hybrid = to_dict(cfg.systems.hybrid)
    for node, params in [
        ({**hybrid, "rrf_k": 60}, RescoreParams(rrf_k=60)),
        ({**hybrid, "rrf_k": 2}, RescoreParams(rrf_k=2)),
        (
            {**hybrid, "fusion": "weighted", "weights": {"bm25": 0.3, "dense": 0.7}},
            RescoreParams(fusion="weighted", channel_weights={"bm25": 0.3, "dense": 0.7}),
        ),
    ]:
        live = _live(cfg, node)
        cached = rescore(cache, params).rankings
        assert {qid: [h.chunk_id for h in hits] for qid, hits in cached.items()} == live


def test_rescoring_reproduces_live_reranking(cfg: DictConfig) -> None:
    from fixgraph.retrieval.blend import BlendReranker
    from fixgraph.retrieval.rerank import build_reranker

    cache = build_candidates(cfg)
    chunks = stages.load_chunks(cfg)
    texts = {c.id: c.index_text() for c in chunks}
    llm = {
        "name": "llm",
        "kind": "llm",
        "top_n": 5,
        "llm": {"name": "fake", "kind": "fake", "default": "no", "responses": {"amber": "yes", "paper": "yes"}},
    }
    hybrid = build_retriever(to_dict(cfg.systems.hybrid))
    hybrid.load(chunks, stages.index(cfg, "hybrid", cfg.systems.hybrid, chunks).output)
    for reranker, weights in [
        (build_reranker(llm), {"llm": 1.0}),
        (
            BlendReranker(scorers={"llm": llm}, weights={"llm": 0.5, "first_stage": 0.5}, top_n=5),
            {"llm": 0.5, "first_stage": 0.5},
        ),
    ]:
        result = rescore(cache, RescoreParams(rrf_k=60, rerank_top_n=5, rerank_weights=weights))
        assert result.unscored == 0
        for question in build_split(cfg.split).load():
            live = reranker.rerank(question.question, hybrid.search(question.question, 100), texts)
            assert [h.chunk_id for h in result.rankings[question.qid]] == [h.chunk_id for h in live]


def test_stale_cache_is_refused(cfg: DictConfig, fixture_config: Callable[..., DictConfig]) -> None:
    build_candidates(cfg)
    assert open_cache(cfg).qids  # same config: the cache is current
    with pytest.raises(StaleCacheError, match="depth"):
        open_cache(fixture_config(["tracking.enabled=false", *SCORER, "candidates.depth=50"]))
    with pytest.raises(StaleCacheError, match="channels"):
        open_cache(fixture_config(["tracking.enabled=false", *SCORER, "candidates.channels.bm25.k1=1.2"]))
    other_llm = SCORER[1].replace("amber:yes", "amber:no")
    with pytest.raises(StaleCacheError, match="scorers"):
        open_cache(fixture_config(["tracking.enabled=false", SCORER[0], other_llm, SCORER[2]]))
