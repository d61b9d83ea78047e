"""MLflow records: one parent run per evaluation, one child run per system.

Backend: sqlite (`mlflow.db`), artifacts under `mlruns/`. Each run carries the resolved config,
metrics with CI bounds, per-question tables, git sha, corpus/chunk/question-file hashes and the
installed package versions, so a number in the UI can be traced back to exactly what produced it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from fixgraph import __version__
from fixgraph.evaluation.cost import cost_metrics
from fixgraph.io import write_json, write_text

if TYPE_CHECKING:
    from fixgraph.evaluation.result import EvaluationResult

KEY_PACKAGES = (
    "torch",
    "sentence-transformers",
    "bm25s",
    "ir-measures",
    "scipy",
    "numpy",
    "hydra-core",
    "dvc",
    "mlflow",
)


def git_state() -> dict[str, str]:
    def git(*args: str) -> str:
        result = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
        return result.stdout.strip() if result.returncode == 0 else ""

    sha = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"git_sha": sha or "unknown", "git_dirty": str(bool(dirty)).lower()}


def package_versions() -> dict[str, str]:
    """Name -> version of every installed distribution, as this process found them on its first call:
    reading ~300 packages' metadata costs ~0.4 s, and each logged run asks twice."""
    return dict(_installed())


@functools.cache
def _installed() -> tuple[tuple[str, str], ...]:
    found = {d.metadata["Name"].lower(): d.version for d in importlib.metadata.distributions() if d.metadata["Name"]}
    return tuple(found.items())


def flatten(node: Any, prefix: str = "") -> dict[str, str]:
    """Dotted keys -> string values, as MLflow params."""
    if isinstance(node, dict):
        out: dict[str, str] = {}
        for key, value in node.items():
            out.update(flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): str(node)[:6000]}


def setup(cfg: DictConfig) -> str:
    """Point MLflow at the configured store; return the experiment id (artifacts under paths.mlruns)."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    import mlflow

    mlflow.set_tracking_uri(str(cfg.tracking.uri))
    name = str(cfg.tracking.experiment)
    experiment = mlflow.get_experiment_by_name(name)
    if experiment is not None:
        return str(experiment.experiment_id)
    artifacts = Path(str(cfg.paths.mlruns)).resolve().as_uri()
    return str(mlflow.create_experiment(name, artifact_location=artifacts))


def log_evaluation(
    cfg: DictConfig,
    result: EvaluationResult,
    extras: Callable[[str], tuple[dict[str, str], dict[str, float]]] | None = None,
) -> str:
    """One parent run per evaluation, one child per system; `extras(system)` adds tags and metrics."""
    import mlflow

    from fixgraph.redact import redact

    experiment_id = setup(cfg)
    resolved = redact(OmegaConf.to_container(cfg, resolve=True))  # no API keys in params or config.yaml
    assert isinstance(resolved, dict)
    info = result.info
    tags = {
        **git_state(),
        "fixgraph_version": __version__,
        "stage": "evaluate",
        "evaluation": result.name,
        "experiment_preset": str(cfg.get("experiment", {}).get("name", "")),
        "questions_file": info["questions_file"],
        "questions_hash": info["questions_hash"],
        "corpus": info["corpus"],
        "corpus_hash": info["corpus_hash"],
        "corpus_version": info["corpus_version"],
        "chunks_hash": info["chunks_hash"],
        **{f"pkg.{name}": version for name, version in package_versions().items() if name in KEY_PACKAGES},
    }
    with mlflow.start_run(
        experiment_id=experiment_id, run_name=f"{result.name}: {', '.join(info['systems'])}"
    ) as parent:
        mlflow.set_tags(tags)
        mlflow.log_params({k: v for k, v in flatten(resolved).items() if not k.startswith("systems.")})
        mlflow.log_metrics(
            {
                "gold_coverage": result.coverage,
                "questions": info["questions"],
                "scored_questions": info["scored_questions"],
            }
        )
        with tempfile.TemporaryDirectory() as tmpdir:
            tmp = Path(tmpdir)
            write_text(tmp / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(resolved)))
            write_json(tmp / "packages.json", package_versions())
            result.per_question.to_csv(tmp / "per_question.csv", index=False)
            mlflow.log_artifacts(str(tmp))
        mlflow.log_artifacts(str(result.output_dir), artifact_path="evaluation")
        for system, metrics in result.metrics.items():
            with mlflow.start_run(experiment_id=experiment_id, run_name=system, nested=True):
                extra_tags, extra_metrics = extras(system) if extras is not None else ({}, {})
                mlflow.set_tags({**tags, "system": system, **extra_tags})
                system_cfg = resolved.get("systems", {}).get(system) or resolved.get("retriever", {})
                mlflow.log_params(
                    {
                        "system": system,
                        **flatten(system_cfg, "retriever."),
                        **flatten(resolved.get("reranker", {}), "reranker."),
                    }
                )
                values: dict[str, float] = {}
                for metric, est in metrics.items():
                    values[metric] = est["mean"]
                    values[f"{metric}_ci_low"] = est["low"]
                    values[f"{metric}_ci_high"] = est["high"]
                values.update(info["latency"].get(system, {}))
                values.update(cost_metrics(info.get("cost", {}).get(system, {})))
                values.update(extra_metrics)
                mlflow.log_metrics(values)
                rows = result.per_question[result.per_question["system"] == system]
                with tempfile.TemporaryDirectory() as tmpdir:
                    path = Path(tmpdir) / "per_question.csv"
                    rows.to_csv(path, index=False)
                    mlflow.log_artifact(str(path))
        return str(parent.info.run_id)
