"""Stages `reranker-data` (corpus -> training groups) and `train-reranker` (groups -> model folder).

Both are incremental like every fixgraph stage (a key of config + input hashes + code hash), and both
are DVC stages, so dvc.lock pins the training data's and the model's hashes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.config import build, to_dict
from fixgraph.io import read_json, sha256_file, stable_hash, write_jsonl
from fixgraph.pipeline.layout import Layout
from fixgraph.pipeline.stages import StageResult, chunk, code_hash, load_chunks, load_documents, run_stage
from fixgraph.training.cross_encoder import TRAINERS, CrossEncoderTrainer
from fixgraph.training.distill import build_distill_groups
from fixgraph.training.pairs import Group, build_groups

DATA_FIELDS = ("query_kinds", "negatives", "negative_pool", "max_groups", "seed", "bm25")
# distillation data also depends on the teacher; absent for hard-label trainers (their keys unchanged)
DISTILL_DATA_FIELDS = ("teacher",)


def build_trainer(cfg: Any) -> CrossEncoderTrainer:
    trainer: CrossEncoderTrainer = build(TRAINERS, cfg)
    return trainer


def reranker_data(cfg: DictConfig) -> StageResult:
    trainer = build_trainer(cfg.trainer)
    chunk(cfg)
    layout = Layout.from_config(cfg)
    fields = DATA_FIELDS + (DISTILL_DATA_FIELDS if trainer.teacher else ())
    settings = {k: v for k, v in to_dict(cfg.trainer).items() if k in fields}
    key = stable_hash(
        {
            "settings": settings,
            "chunks": sha256_file(layout.chunks),
            "documents": sha256_file(layout.documents),
            "code": code_hash("training"),
        }
    )

    def produce(out: Path) -> dict[str, Any]:
        common = (
            load_documents(cfg),
            load_chunks(cfg),
            trainer.query_kinds,
            trainer.negatives,
            trainer.negative_pool,
            trainer.max_groups,
            trainer.seed,
            trainer.bm25,
        )
        groups = (
            build_distill_groups(*common, trainer.teacher, trainer.teacher_cache)
            if trainer.teacher
            else build_groups(*common)
        )
        write_jsonl(out / trainer.pairs.name, (g.to_json() for g in groups))
        kinds: dict[str, int] = {}
        for g in groups:
            kinds[g.query_kind] = kinds.get(g.query_kind, 0) + 1
        return {"groups": len(groups), "query_kinds": kinds}

    return run_stage("reranker-data", trainer.pairs.parent, key, produce)


def load_groups(path: Path) -> list[Group]:
    import json

    with open(path, encoding="utf-8") as fh:
        return [Group.from_json(json.loads(line)) for line in fh if line.strip()]


def train_reranker(cfg: DictConfig) -> StageResult:
    trainer = build_trainer(cfg.trainer)
    reranker_data(cfg)
    layout = Layout.from_config(cfg)
    data_hash = sha256_file(trainer.pairs)
    key = stable_hash(
        {
            "trainer": trainer.config(),
            "data": data_hash,
            "chunks": sha256_file(layout.chunks),
            "code": code_hash("training"),
        }
    )

    def produce(out: Path) -> dict[str, Any]:
        manifest = trainer.train(load_groups(trainer.pairs), load_chunks(cfg), out, data_hash)
        return {k: manifest[k] for k in ("groups", "steps", "first_loss", "last_loss", "weights_sha256")}

    result = run_stage("train-reranker", trainer.output, key, produce)
    if result.status == "cached":
        result.info.setdefault("weights_sha256", read_json(trainer.output / "fixgraph_model.json")["weights_sha256"])
    return result
