"""MLflow records of a sweep: the study's parent run, one child run per trial, the final summary."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from fixgraph.config import systems_of, to_dict
from fixgraph.experiment.sweep_spec import SweepSpec
from fixgraph.io import write_json

if TYPE_CHECKING:
    from fixgraph.experiment.sweep import SweepSummary


def create_parent_run(cfg: DictConfig, spec: SweepSpec, study: str, storage: str, digest: str) -> str:
    import mlflow

    from fixgraph.tracking import flatten, git_state, setup

    experiment_id = setup(cfg)
    with mlflow.start_run(experiment_id=experiment_id, run_name=f"sweep {study}") as run:
        # not `system`: that tag marks an evaluation's per-system runs (what `fixgraph compare` selects)
        tags = {"stage": "sweep", "study": study, "sweep": spec.name, "swept_system": spec.system}
        mlflow.set_tags({**git_state(), **tags})
        mlflow.log_params(
            {
                "storage": storage.split("@")[-1],  # never a password
                "spec_digest": digest,
                "objective": spec.objective,
                "direction": spec.direction,
                **flatten(spec.describe()["space"], "space."),
                **flatten(to_dict(systems_of(cfg)[spec.system]), "base."),
            }
        )
        return str(run.info.run_id)


def log_trial(experiment_id: str, parent: str, study: str, trial: Any, metrics: dict[str, float], path: str) -> str:
    """One child run per trial, written in three store calls (create, one batch, terminate)."""
    import time as _time

    import mlflow
    from mlflow.entities import Metric, Param

    client = mlflow.MlflowClient()
    tags = {"stage": "sweep_trial", "study": study, "trial": str(trial.number), "scoring_path": path}
    run = client.create_run(
        experiment_id, run_name=f"trial {trial.number}", tags={**tags, "mlflow.parentRunId": parent}
    )
    now = int(_time.time() * 1000)
    client.log_batch(
        run.info.run_id,
        metrics=[Metric(key, value, now, 0) for key, value in metrics.items()],
        params=[Param(key, str(value)) for key, value in trial.params.items()],
    )
    client.set_terminated(run.info.run_id)
    return str(run.info.run_id)


def record(cfg: DictConfig, study: Any, summary: SweepSummary) -> None:
    """trials.csv + summary.json under artifacts/sweeps/<study>/, and both on the MLflow parent run."""
    folder = Path(str(cfg.paths.artifacts)) / "sweeps" / summary.study
    folder.mkdir(parents=True, exist_ok=True)
    study.trials_dataframe(attrs=("number", "value", "params", "state", "user_attrs")).to_csv(
        folder / "trials.csv", index=False
    )
    write_json(folder / "summary.json", summary.__dict__)
    if summary.parent_run_id and bool(cfg.tracking.enabled):
        import mlflow

        from fixgraph.tracking import setup

        setup(cfg)
        with mlflow.start_run(run_id=summary.parent_run_id):
            if summary.best_value is not None:
                mlflow.log_metrics(
                    {"best_value": summary.best_value, "complete_trials": summary.complete, "pruned": summary.pruned}
                )
                mlflow.set_tags({f"best.{k}": str(v) for k, v in summary.best_params.items()})
            mlflow.log_artifact(str(folder / "trials.csv"))
            mlflow.log_artifact(str(folder / "summary.json"))
