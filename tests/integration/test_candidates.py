"""The candidate cache: recorded values keyed by what produced them, reused across systems, never stale."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from fixgraph.config import systems_of
from fixgraph.evaluation.splits import build_split
from fixgraph.pipeline.candidates import CandidateStore, NotReplayable, Replayer, record_candidates, replay_rankings
from fixgraph.pipeline.stages import chunk, load_chunks


def _replayer(cfg: DictConfig) -> Replayer:
    chunk(cfg)
    return Replayer(cfg, load_chunks(cfg), CandidateStore.of(cfg))


def test_record_then_replay_shares_leaves_across_systems(protocol_config: Callable[..., DictConfig]) -> None:
    cfg = protocol_config(["tracking.enabled=false"])  # bm25, dense, hybrid (= bm25 + dense fused)
    recorded = record_candidates(cfg)
    assert recorded["bm25"].misses > 0 and recorded["dense"].misses > 0
    assert recorded["hybrid"].misses == 0  # its channels are the bm25 and dense leaves recorded just before
    questions = build_split(cfg.split).load()
    replayer = _replayer(cfg)
    for name, system_cfg in systems_of(cfg).items():
        _, stats = replay_rankings(replayer, system_cfg, questions, int(cfg.evaluation.depth))
        assert stats.path == "cached", name


def test_a_changed_leaf_or_chunking_is_recomputed_not_reused(protocol_config: Callable[..., DictConfig]) -> None:
    cfg = protocol_config(["tracking.enabled=false"])
    record_candidates(cfg)
    questions = build_split(cfg.split).load()
    other_k1 = OmegaConf.create({**OmegaConf.to_container(systems_of(cfg)["bm25"]), "k1": 1.7})  # type: ignore[dict-item]
    _, stats = replay_rankings(_replayer(cfg), other_k1, questions, int(cfg.evaluation.depth))
    assert stats.path == "live" and stats.hits == 0  # another BM25: nothing of the old one is served
    before = [c.id for c in load_chunks(cfg)]
    rechunked = protocol_config(["tracking.enabled=false", "chunker.max_tokens=24", "chunker.min_tokens=4"])
    replayer = _replayer(rechunked)
    assert [c.id for c in replayer.chunks] != before
    _, stats = replay_rankings(replayer, systems_of(rechunked)["bm25"], questions, 100)
    assert stats.hits == 0  # other chunks: another identity


def test_a_model_retrained_in_the_same_folder_is_another_leaf(
    protocol_config: Callable[..., DictConfig], tmp_path: Path
) -> None:
    """A trained model is named by its folder; a retrain writes new weights (and card) there, and what the
    old weights ranked must not be replayed for the new ones."""
    from fixgraph.io import write_json

    replayer = _replayer(protocol_config(["tracking.enabled=false"]))
    folder = tmp_path / "models" / "tuned"
    leaf = {"kind": "dense", "name": "d", "embedder": {"kind": "sentence_transformers", "query_model": str(folder)}}
    untrained = replayer.leaf_identity(leaf)
    folder.mkdir(parents=True)
    write_json(folder / "fixgraph_model.json", {"weights_sha256": {"model.safetensors": "aaa"}})
    first = replayer.leaf_identity(leaf)
    assert first != untrained and replayer.leaf_identity(leaf) == first  # stable while the weights are
    write_json(folder / "fixgraph_model.json", {"weights_sha256": {"model.safetensors": "bbb"}})
    assert replayer.leaf_identity(leaf) not in (first, untrained)


def test_a_reranker_without_scores_is_refused(protocol_config: Callable[..., DictConfig]) -> None:
    from fixgraph.retrieval.rerank import RERANKERS

    class Shuffler:  # reorders without a per-candidate score: nothing to record
        def __init__(self, name: str = "shuffler") -> None:
            self.name = name

        def rerank(self, query: str, hits: list[object], texts: object) -> list[object]:
            return list(reversed(hits))

    if "test_shuffler" not in RERANKERS:
        RERANKERS.register("test_shuffler")(Shuffler)
    cfg = protocol_config(["tracking.enabled=false"])
    node = OmegaConf.create(
        {
            "name": "x",
            "kind": "reranked",
            "first_stage": OmegaConf.to_container(systems_of(cfg)["bm25"]),
            "reranker": {"name": "shuffler", "kind": "test_shuffler"},
            "depth": 10,
        }
    )
    with pytest.raises(NotReplayable, match="gives no per-candidate scores"):
        _replayer(cfg).system(node)
