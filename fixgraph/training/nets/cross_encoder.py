"""The torch side of the cross-encoder trainer (training/cross_encoder.py): the listwise (optionally
distilled) group loss, the collator and the LightningModule."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from fixgraph.training.distill import distill_loss
from fixgraph.training.fit import GroupRankingModule


def group_loss(logits: torch.Tensor, teacher: torch.Tensor | None, temperature: float, distill_weight: float) -> Any:
    """Listwise loss of groups (logits: groups x (1 + negatives), positive first); with teacher scores,
    `distill_weight` x KL(teacher softmax || student) + (1 - distill_weight) x hard-label cross-entropy."""
    hard = torch.nn.functional.cross_entropy(logits, torch.zeros(len(logits), dtype=torch.long))
    if teacher is None:
        return hard
    soft = distill_loss(logits, teacher, temperature)
    return distill_weight * soft + (1.0 - distill_weight) * hard


class GroupCollator:
    """Rows of the groups dataset -> (tokenised (query, passage) pairs, teacher scores or None, group size)."""

    def __init__(self, tokenizer: Any, max_length: int, distill: bool) -> None:
        self.tokenizer, self.max_length, self.distill = tokenizer, max_length, distill

    def __call__(self, rows: Sequence[Mapping[str, Any]]) -> tuple[Any, torch.Tensor | None, int]:
        sizes = {len(r["texts"]) for r in rows}
        if len(sizes) != 1:
            raise ValueError(f"training groups differ in size within a batch: {sorted(sizes)}")
        queries = [r["query"] for r in rows for _ in r["texts"]]
        passages = [t for r in rows for t in r["texts"]]
        features = self.tokenizer(
            queries, passages, truncation="only_second", max_length=self.max_length, padding=True, return_tensors="pt"
        )
        teacher = torch.tensor([list(r["teacher"]) for r in rows], dtype=torch.float32) if self.distill else None
        return features, teacher, sizes.pop()


class CrossEncoderModule(GroupRankingModule):
    def __init__(
        self, network: Any, learning_rate: float, warmup_ratio: float, temperature: float, distill_weight: float
    ) -> None:
        super().__init__()
        self.network = network
        self.learning_rate, self.warmup_ratio = learning_rate, warmup_ratio
        self.temperature, self.distill_weight = temperature, distill_weight

    def _step(self, batch: tuple[Any, torch.Tensor | None, int]) -> tuple[Any, torch.Tensor]:
        features, teacher, size = batch
        logits = self.network(**features).logits.view(-1, size)
        return group_loss(logits, teacher, self.temperature, self.distill_weight), logits

    def _targets(self, scores: torch.Tensor) -> torch.Tensor:
        # each group lists its positive first
        return torch.zeros(len(scores), dtype=torch.long, device=scores.device)
