"""The torch side of the QLoRA trainer (training/generator.py): the chat collator (prompt tokens masked
from the loss) and the LightningModule with its 8-bit optimisers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from fixgraph.training.fit import FixgraphModule, warmup_then_linear


class ChatCollator:
    def __init__(self, tokenizer: Any) -> None:
        self.pad = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id)

    def __call__(self, rows: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        width = max(len(r["input_ids"]) for r in rows)
        ids = torch.full((len(rows), width), self.pad, dtype=torch.long)
        labels = torch.full((len(rows), width), -100, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            n, start = len(r["input_ids"]), int(r["prompt_tokens"])
            ids[i, :n] = torch.tensor(r["input_ids"])
            mask[i, :n] = 1
            labels[i, start:n] = ids[i, start:n]
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


class GeneratorModule(FixgraphModule):
    trainable_only = True  # checkpoints hold the adapters, not the frozen 4-bit base

    def __init__(self, model: Any, learning_rate: float, warmup_ratio: float, optimizer: str) -> None:
        super().__init__()
        self.model = model
        self.learning_rate, self.warmup_ratio, self.optimizer_name = learning_rate, warmup_ratio, optimizer

    def training_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> Any:
        loss = self.model(**batch).loss
        self.log("train_loss", loss, on_step=True, on_epoch=False, batch_size=len(batch["input_ids"]))
        return loss

    def validation_step(self, batch: Mapping[str, torch.Tensor], batch_idx: int) -> None:
        self.log("val_loss", self.model(**batch).loss, on_epoch=True, batch_size=len(batch["input_ids"]))

    def configure_optimizers(self) -> Any:
        params = [p for p in self.parameters() if p.requires_grad]
        if self.optimizer_name == "adamw":
            optimizer: Any = torch.optim.AdamW(params, lr=self.learning_rate)
        else:
            import bitsandbytes as bnb

            kind = bnb.optim.PagedAdamW8bit if self.optimizer_name == "paged_adamw_8bit" else bnb.optim.AdamW8bit
            optimizer = kind(params, lr=self.learning_rate)
        return warmup_then_linear(optimizer, self.warmup_ratio, int(self.trainer.estimated_stepping_batches))
