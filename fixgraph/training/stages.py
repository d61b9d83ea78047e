"""Training stages: `corpus-qa` (LLM pairs), `train-data` (corpus -> DatasetDict) and `train` (data -> model).

All are incremental like every fixgraph stage (a key of config + input hashes + code hash) and DVC
stages (pipelines/training/dvc.yaml), so dvc.lock pins the data's and the model's hashes. The trainer
is the global `trainer` option, or with `name`, one of `training.trainers` (what the DVC pipeline
trains, one stage per name). The model folder gets a card, `fixgraph_model.json`: trainer config, data
hash, split sizes, losses and the weights' sha256; how this build went (seconds, the MLflow run id, the
checkpoint it resumed from, git sha) goes to `_run/stage.json`, outside DVC's hashes, so the card of a
model retrained bit for bit is byte for byte the same.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.config import ConfigError, build, config_strings, to_dict
from fixgraph.io import read_json, sha256_file, stable_hash, write_json
from fixgraph.pipeline.layout import Layout
from fixgraph.pipeline.stages import StageResult, chunk, load_chunks, run_stage
from fixgraph.training.base import MANIFEST, Trainer, code_of
from fixgraph.training.data import data_hash
from fixgraph.training.kinds import TRAINERS
from fixgraph.training.settings import Tracking

log = logging.getLogger(__name__)

# facts of one build, not of the model: kept out of the card (fixgraph/io.py RUN_DIR)
RUN_FACTS = ("fit_seconds", "mlflow_run_id", "resumed_from")


def build_trainer(cfg: Any) -> Trainer:
    trainer: Trainer = build(TRAINERS, cfg)
    return trainer


def trainer_config(cfg: DictConfig, name: str | None = None) -> DictConfig:
    """The global `trainer`, or `training.trainers[name]`."""
    if name is None:
        node = cfg.trainer
    else:
        trainers = cfg.get("training", {}).get("trainers", {}) or {}
        if name not in trainers:
            raise ConfigError(f"unknown trainer {name!r}; training.trainers has: {', '.join(trainers) or 'none'}")
        node = trainers[name]
    assert isinstance(node, DictConfig)
    return node


def training_data(cfg: DictConfig, name: str | None = None) -> StageResult:
    trainer = build_trainer(trainer_config(cfg, name))
    chunk(cfg)
    trainer.prepare(cfg)
    key = stable_hash(
        {
            "kind": trainer.kind,
            "data": trainer.data_config,
            "inputs": trainer.data_inputs(cfg),
            "code": trainer.code_hash(),
        }
    )

    def produce(out: Path) -> dict[str, Any]:
        info = trainer.build_data(cfg, out)
        info["data_sha256"] = data_hash(out)
        return info

    return run_stage("train-data", trainer.data_dir, key, produce)


def tracking_target(cfg: DictConfig, trainer: Trainer, data_sha: str) -> Tracking | None:
    if not bool(cfg.tracking.enabled):
        return None
    from fixgraph.tracking import git_state, setup

    setup(cfg)  # creates the experiment with its artifact location under paths.mlruns
    return Tracking(
        uri=str(cfg.tracking.uri),
        experiment=str(cfg.tracking.experiment),
        artifact_location=Path(str(cfg.paths.mlruns)).resolve().as_uri(),
        run_name=f"train {trainer.name}",
        params={"trainer": trainer.config(), "trainer_name": trainer.name},
        tags={
            **git_state(),
            "stage": "train",
            "trainer": trainer.name,
            "trainer_kind": trainer.kind,
            "corpus": str(cfg.corpus.name),
            "data_sha256": data_sha,
        },
    )


def train(cfg: DictConfig, name: str | None = None) -> StageResult:
    trainer = build_trainer(trainer_config(cfg, name))
    data_result = training_data(cfg, name)
    data_sha = str(data_result.info.get("data_sha256") or data_hash(trainer.data_dir))
    key = stable_hash({"trainer": trainer.config(), "data": data_sha, "code": trainer.code_hash()})
    work_dir = Path(str(cfg.paths.artifacts)) / "cache" / "training" / trainer.name / key[:16]

    def produce(out: Path) -> dict[str, Any]:
        tracking = tracking_target(cfg, trainer, data_sha)
        facts = trainer.train(cfg, trainer.data_dir, out, work_dir, tracking)
        card = {
            "name": trainer.name,
            "kind": trainer.kind,
            "trainer": trainer.config(),
            "data_dir": str(trainer.data_dir),
            "data_sha256": data_sha,
            "data": {k: v for k, v in data_result.info.items() if k not in ("seconds", "data_sha256")},
            **{k: v for k, v in facts.items() if k not in RUN_FACTS},
        }
        write_json(out / MANIFEST, card)
        if tracking is not None and facts.get("mlflow_run_id"):
            _log_card(tracking, str(facts["mlflow_run_id"]), out / MANIFEST, facts)
        git_sha = _git_sha() if tracking is None else tracking.tags.get("git_sha", "")
        return {k: card[k] for k in ("name", "kind", "data_sha256", "steps", "best_val_loss") if k in card} | {
            "weights_sha256": card.get("weights_sha256", {}),
            "run": {**{k: facts[k] for k in RUN_FACTS if k in facts}, "git_sha": git_sha},
        }

    result = run_stage("train", trainer.output, key, produce)
    if result.status == "built":
        shutil.rmtree(work_dir, ignore_errors=True)  # checkpoints only serve to resume an unfinished run
    elif "weights_sha256" not in result.info and (trainer.output / MANIFEST).exists():
        result.info["weights_sha256"] = read_json(trainer.output / MANIFEST).get("weights_sha256", {})
    return result


def missing_models(cfg: DictConfig, system_cfg: DictConfig) -> list[str]:
    """The `training.trainers` whose model folder a system config names and that have no model there yet."""
    named = {value for _, value in config_strings(to_dict(system_cfg))}
    trainers = cfg.get("training", {}).get("trainers", {}) or {}
    return [
        name
        for name, node in trainers.items()
        if str(node.output) in named and not (Path(str(node.output)) / MANIFEST).is_file()
    ]


def require_models(cfg: DictConfig, systems: Mapping[str, DictConfig]) -> None:
    """Refuse, before any ranking, systems whose fine-tuned model is not trained yet, naming the command
    that trains it (not trained on the spot: some trainers need hours of the local LLM first)."""
    missing = [(system, name) for system, node in systems.items() for name in missing_models(cfg, node)]
    if missing:
        needs = "; ".join(
            f"system {system} needs trainer {name}'s model ({trainer_config(cfg, name).output}): "
            f"run `fixgraph train --trainer {name} corpus={cfg.corpus.name}`"
            for system, name in missing
        )
        raise ConfigError(
            f"{needs} (`make models` trains ltr_dev's and ltr_dev_queries', `make models-ft` ltr_ft's for both corpora)"
        )


def _git_sha() -> str:
    from fixgraph.tracking import git_state

    return git_state()["git_sha"]


def _log_card(tracking: Tracking, run_id: str, card: Path, facts: dict[str, Any]) -> None:
    """The model card as an artifact of the training run, and its summary numbers as final metrics."""
    import math

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking.uri)
    client.log_artifact(run_id, str(card))
    for key in ("first_train_loss", "last_train_loss", "best_val_loss", "first_val_loss", "fit_seconds"):
        value = facts.get(key)
        if isinstance(value, int | float) and math.isfinite(value):
            client.log_metric(run_id, f"final_{key}", float(value))


# --- corpus Q/A pairs (LLM) -------------------------------------------------------------------------


def corpus_qa(cfg: DictConfig) -> StageResult:
    from fixgraph.evaluation.questions import load_questions
    from fixgraph.llm.base import build_llm
    from fixgraph.training.corpus_qa import generate_pairs

    settings = cfg.training.corpus_qa
    chunk(cfg)
    layout = Layout.from_config(cfg)
    llm = build_llm(settings.llm)
    exclude = [Path(str(p)) for p in settings.exclude_questions]
    missing = [str(p) for p in exclude if not p.exists()]
    if missing:
        raise FileNotFoundError(f"training.corpus_qa.exclude_questions: no such file(s): {', '.join(missing)}")
    fields = {k: v for k, v in to_dict(settings).items() if k not in ("llm", "output")}
    key = stable_hash(
        {
            "settings": fields,
            "llm": llm.identity(),
            "chunks": sha256_file(layout.chunks),
            "exclude": {str(p): sha256_file(p) for p in exclude},
            "code": code_of(["fixgraph.training.corpus_qa"]),  # the prompt file is in its version
        }
    )

    def produce(out: Path) -> dict[str, Any]:
        from fixgraph.io import write_jsonl

        benchmark = [q.question for p in exclude for q in load_questions(p)]
        pairs, summary = generate_pairs(
            load_chunks(cfg),
            llm,
            str(settings.prompt),
            int(settings.min_words),
            float(settings.min_support),
            int(settings.max_tokens),
            benchmark,
            float(settings.max_benchmark_similarity),
            None if settings.max_chunks is None else int(settings.max_chunks),
        )
        write_jsonl(out / "qa.jsonl", (p.to_json() for p in pairs))
        write_json(out / "summary.json", summary)
        return {k: summary[k] for k in ("eligible_chunks", "kept", "rejected")}

    try:
        return run_stage("corpus-qa", Path(str(settings.output)), key, produce)
    finally:
        llm.close()


# the verbs that existed before the generic stages (and the DVC stages of pipelines/reranker)
reranker_data = training_data
train_reranker = train
