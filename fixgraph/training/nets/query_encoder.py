"""The torch side of the query-encoder trainer (training/query_encoder.py): a question's vector scored
against every row of a frozen dense index, as DenseRetriever scores it, and the LightningModule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from fixgraph.training.fit import GroupRankingModule
from fixgraph.training.nets.bi_encoder import sentence_vectors


class FrozenIndex:
    """One corpus's dense index rows (documents, and lines when `block_weight` > 0), never trained.

    Plain tensors, not module buffers: checkpoints hold the query encoder, not the corpus."""

    def __init__(
        self, matrix: np.ndarray, owner: np.ndarray, is_line: np.ndarray, chunk_ids: Sequence[str], block_weight: float
    ) -> None:
        self.matrix = torch.from_numpy(np.ascontiguousarray(matrix, dtype=np.float32))
        self.owner = torch.from_numpy(np.asarray(owner, dtype=np.int64))
        self.is_line = torch.from_numpy(np.asarray(is_line, dtype=bool))
        self.position = {cid: i for i, cid in enumerate(chunk_ids)}
        self.block_weight = block_weight

    def scores(self, query: torch.Tensor) -> torch.Tensor:
        """Per chunk: (1 - w) x its best own row's cosine + w x its best line's (its own where it has no
        line), DenseRetriever.own_and_line and blend, differentiable in `query`."""
        rows = self.matrix @ query
        floor = torch.full((len(self.position),), -2.0, dtype=rows.dtype)  # below any cosine
        own = floor.scatter_reduce(0, self.owner[~self.is_line], rows[~self.is_line], "amax")
        if self.block_weight == 0:
            return own
        line = floor.scatter_reduce(0, self.owner[self.is_line], rows[self.is_line], "amax")
        line = torch.where(line > -2.0, line, own)
        return (1 - self.block_weight) * own + self.block_weight * line


def gold_loss(logits: torch.Tensor, gold: Sequence[Sequence[int]]) -> torch.Tensor:
    """Mean over a question's gold items of -log P(item), P the softmax over every chunk of its corpus and
    an item's probability the sum over the chunks that hold it (a quote may span two chunks)."""
    log_p = torch.log_softmax(logits, dim=0)
    return -torch.stack([torch.logsumexp(log_p[list(item)], dim=0) for item in gold]).mean()


class QuestionCollator:
    def __call__(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return {
            "queries": [r["query"] for r in rows],
            "corpora": [r["corpus"] for r in rows],
            "gold": [[list(item) for item in r["gold"]] for r in rows],
        }


class QueryEncoderModule(GroupRankingModule):
    def __init__(
        self,
        model: Any,
        indexes: Mapping[str, FrozenIndex],
        learning_rate: float,
        warmup_ratio: float,
        scale: float,
        prefix: str = "",
    ) -> None:
        super().__init__()
        self.model = model
        self.indexes = dict(indexes)
        self.learning_rate, self.warmup_ratio = learning_rate, warmup_ratio
        self.scale, self.prefix = scale, prefix

    def embed(self, texts: Sequence[str]) -> torch.Tensor:
        """The embedder's query vectors: its query prefix, then the model's own modules (truncated at the
        model's max_seq_length, which the trainer sets to the embedder's query length)."""
        return sentence_vectors(self.model, [self.prefix + t for t in texts])

    def _rows(self, batch: Mapping[str, Any]) -> tuple[Any, list[tuple[torch.Tensor, list[list[int]]]]]:
        vectors = self.embed(batch["queries"])
        scored = []
        for vector, corpus, gold in zip(vectors, batch["corpora"], batch["gold"], strict=True):
            index = self.indexes[corpus]
            items = [[index.position[c] for c in item] for item in gold]
            scored.append((self.scale * index.scores(vector), items))
        loss = torch.stack([gold_loss(logits, items) for logits, items in scored]).mean()
        return loss, scored

    def _step(self, batch: Mapping[str, Any]) -> tuple[Any, Any]:
        return self._rows(batch)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        loss, scored = self._rows(batch)
        top1 = torch.tensor([float(int(logits.argmax()) in {c for i in items for c in i}) for logits, items in scored])
        self.log("val_loss", loss, on_epoch=True, batch_size=len(scored))
        self.log("val_top1", top1.mean(), on_epoch=True, batch_size=len(scored))
