"""Weighted fusion, weighted RRF and z-normalised blends against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fixgraph.retrieval.base import Hit
from fixgraph.retrieval.blend import BlendReranker, blend_scores, znorm
from fixgraph.retrieval.fusion import normalise, rrf, weighted


def test_weighted_fusion_by_hand() -> None:
    # channel x: scores 3, 1 -> z = +1, -1 ; channel y: scores 10, 6, 2 -> z = +1.2247, 0, -1.2247
    x = [Hit("a", 3.0), Hit("b", 1.0)]
    y = [Hit("b", 10.0), Hit("c", 6.0), Hit("a", 2.0)]
    fused = weighted({"x": x, "y": y}, {"x": 0.5, "y": 1.0}, depth=10)
    z = math.sqrt(1.5)
    expected = {"a": 0.5 * 1 + 1.0 * -z, "b": 0.5 * -1 + 1.0 * z, "c": 0.5 * -1 + 0.0}  # c absent from x: x's min
    assert {h.chunk_id: h.score for h in fused} == pytest.approx(expected)
    assert [h.chunk_id for h in fused] == ["b", "c", "a"]


def test_minmax_normalisation_by_hand() -> None:
    assert normalise(np.array([2.0, 4.0, 3.0]), "minmax").tolist() == [0.0, 1.0, 0.5]
    with pytest.raises(ValueError, match="unknown normalization"):
        normalise(np.array([1.0]), "softmax")


def test_weighted_rrf_by_hand() -> None:
    fused = rrf({"x": [Hit("a", 1), Hit("b", 1)], "y": [Hit("b", 1)]}, k=10, depth=5, weights={"x": 2.0, "y": 1.0})
    assert {h.chunk_id: h.score for h in fused} == pytest.approx({"a": 2 / 11, "b": 2 / 12 + 1 / 11})


def test_znorm_and_blend_by_hand() -> None:
    assert znorm(np.array([1.0, 3.0])).tolist() == [-1.0, 1.0]
    assert znorm(np.array([5.0, 5.0])).tolist() == [0.0, 0.0]  # no spread: no say
    blended = blend_scores(
        {"ce": np.array([0.0, 4.0, 2.0]), "first_stage": np.array([3.0, 1.0, 2.0])}, {"ce": 1, "first_stage": 2}
    )
    z = math.sqrt(1.5)
    assert blended.tolist() == pytest.approx([-z + 2 * z, z - 2 * z, 0.0])


class _Lengths:
    """A scorer for tests: longer passages score higher."""

    name = "lengths"

    def identity(self) -> str:
        return "lengths"

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        return np.array([len(p) for p in passages], dtype=float)


def test_blend_reranker_combines_scorer_and_first_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    blend = BlendReranker(scorers={}, weights={"first_stage": 1.0}, top_n=3)
    blend.scorers = {"lengths": _Lengths()}
    blend.weights = {"lengths": 1.0, "first_stage": 1.0}
    hits = [Hit("a", 3.0), Hit("b", 2.0), Hit("c", 1.0), Hit("d", 0.5)]
    texts = {"a": "x", "b": "xxxxxxxxx", "c": "xxxxx", "d": "xxxxxxxxxxxxxxxxxxxxxxxx"}
    # z(lengths over a,b,c = 1,9,5) = (-1.2247, 1.2247, 0); z(first stage 3,2,1) = (1.2247, 0, -1.2247)
    ranked = blend.rerank("q", hits, texts)
    assert [h.chunk_id for h in ranked] == ["b", "a", "c", "d"]  # d stays below the reranked top 3


def test_blend_rejects_weights_without_scorer() -> None:
    with pytest.raises(ValueError, match="name no scorer"):
        BlendReranker(scorers={}, weights={"cross_encoder": 1.0})
