"""The torch side of the bi-encoder trainer (training/bi_encoder.py): in-batch contrastive loss, the
same-page mask, the collator and the LightningModule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from fixgraph.training.fit import GroupRankingModule


def contrastive_loss(queries: torch.Tensor, candidates: torch.Tensor, mask: torch.Tensor, scale: float) -> Any:
    """InfoNCE: row i's target is candidate i; `mask` (queries x candidates, True = excluded) removes
    same-page candidates other than the target. Inputs are L2-normalised embeddings."""
    scores = scale * queries @ candidates.T
    scores = scores.masked_fill(mask, float("-inf"))
    return torch.nn.functional.cross_entropy(scores, torch.arange(len(queries))), scores


def same_page_mask(query_docs: Sequence[str], candidate_docs: Sequence[str]) -> torch.Tensor:
    """True where a candidate comes from the query's page and is not the query's own positive (column i)."""
    mask = torch.tensor([[q == c for c in candidate_docs] for q in query_docs], dtype=torch.bool)
    mask[torch.arange(len(query_docs)), torch.arange(len(query_docs))] = False
    return mask


def same_question_mask(queries: Sequence[str], n_candidates: int) -> torch.Tensor:
    """True where a candidate is another row's positive for the same question (its other gold chunks);
    columns past the positives (hard negatives) are never masked."""
    mask = torch.zeros((len(queries), n_candidates), dtype=torch.bool)
    for i, query in enumerate(queries):
        for j, other in enumerate(queries):
            mask[i, j] = i != j and query == other
    return mask


def sentence_vectors(model: Any, texts: Sequence[str]) -> torch.Tensor:
    """A sentence-transformers model's own path (its tokenizer, truncation, pooling), L2-normalised: the
    vectors its `encode` gives, with gradients."""
    vectors = model(model.preprocess(list(texts)))["sentence_embedding"]
    return torch.nn.functional.normalize(vectors, dim=-1)


class PairCollator:
    def __init__(self, query_prefix: str, document_prefix: str, mask: str = "page") -> None:
        self.query_prefix, self.document_prefix, self.mask = query_prefix, document_prefix, mask

    def __call__(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        candidates = [r["positive_text"] for r in rows] + [t for r in rows for t in r["negative_texts"]]
        docs = [r["doc_id"] for r in rows] + [d for r in rows for d in r["negative_docs"]]
        return {
            "queries": [self.query_prefix + r["query"] for r in rows],
            "candidates": [self.document_prefix + t for t in candidates],
            "mask": same_page_mask([r["doc_id"] for r in rows], docs)
            if self.mask == "page"
            else same_question_mask([r["query"] for r in rows], len(candidates)),
        }


class BiEncoderModule(GroupRankingModule):
    def __init__(self, model: Any, learning_rate: float, warmup_ratio: float, scale: float) -> None:
        super().__init__()
        self.model = model
        self.learning_rate, self.warmup_ratio, self.scale = learning_rate, warmup_ratio, scale

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        return sentence_vectors(self.model, texts)

    def _step(self, batch: Mapping[str, Any]) -> tuple[Any, torch.Tensor]:
        queries, candidates = self.embed(batch["queries"]), self.embed(batch["candidates"])
        loss, scores = contrastive_loss(queries, candidates, batch["mask"], self.scale)
        return loss, scores

    def _targets(self, scores: torch.Tensor) -> torch.Tensor:
        # query i's own passage is candidate i (the other queries' passages are its in-batch negatives)
        return torch.arange(len(scores), device=scores.device)
