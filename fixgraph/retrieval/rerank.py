"""The `reranker` registry: second-stage scorers applied to a first stage's candidates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from fixgraph.registry import Registry
from fixgraph.retrieval.base import Hit


class Reranker(Protocol):
    name: str

    def rerank(self, query: str, hits: Sequence[Hit], texts: Mapping[str, str]) -> list[Hit]:
        """Reorder `hits` for `query`; `texts` maps chunk id -> the text to score."""
        ...


RERANKERS: Registry[Reranker] = Registry("reranker")


@RERANKERS.register("none")
class NoReranker:
    """Keeps the first-stage order: the baseline every reranker is compared with."""

    def __init__(self, name: str = "none", **_: Any) -> None:
        self.name = name

    def rerank(self, query: str, hits: Sequence[Hit], texts: Mapping[str, str]) -> list[Hit]:
        return list(hits)


def build_reranker(cfg: Any) -> Reranker:
    from fixgraph.config import build

    return build(RERANKERS, cfg)
