"""MLflow records of a sweep: the study's parent run, one child run per trial, the final summary."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

from fixgraph.experiment.sweep_spec import SweepSpec
from fixgraph.io import write_json
from fixgraph.redact import REDACTED, is_secret, redact
from fixgraph.tracking import flatten

if TYPE_CHECKING:
    from fixgraph.experiment.sweep import SweepSummary
    from fixgraph.experiment.trials import TrialResult

BATCH = 100  # MLflow's limit on params per log_batch call


def create_parent_run(cfg: DictConfig, spec: SweepSpec, study: str, storage: str, digest: str) -> str:
    import mlflow

    from fixgraph.tracking import git_state, setup

    experiment_id = setup(cfg)
    with mlflow.start_run(experiment_id=experiment_id, run_name=f"sweep {study}") as run:
        # not `system`: that tag marks an evaluation's per-system runs (what `fixgraph compare` selects)
        tags = {"stage": "sweep", "study": study, "sweep": spec.name, "swept_system": spec.system or ""}
        mlflow.set_tags({**git_state(), **tags})
        mlflow.log_params(
            {
                "storage": storage.split("@")[-1],  # never a password
                "spec_digest": digest,
                "objective": spec.objective,
                "direction": spec.direction,
                "base_overrides": " ".join(spec.base),
                **flatten(spec.describe()["space"], "space."),
            }
        )
        return str(run.info.run_id)


def log_trial(
    experiment_id: str, parent: str, study: str, trial: Any, metrics: dict[str, float], result: TrialResult
) -> str:
    """One child run per trial: its parameters, overrides and resolved system config, metrics, and how
    it was scored (cached or live, with the candidate cache's hits and misses)."""
    import time as _time

    import mlflow
    from mlflow.entities import Metric, Param

    client = mlflow.MlflowClient()
    tags = {
        "stage": "sweep_trial",
        "study": study,
        "trial": str(trial.number),
        "scoring_path": result.stats.path,
        "overrides": " ".join(redact_overrides(result.overrides))[:5000],
        "swept_system": result.system,
    }
    run = client.create_run(
        experiment_id, run_name=f"trial {trial.number}", tags={**tags, "mlflow.parentRunId": parent}
    )
    now = int(_time.time() * 1000)
    params = {
        **{f"trial.{k}": str(v) for k, v in trial.params.items()},
        **flatten(redact(result.system_config), "system."),
    }
    values = {**metrics, "cache_hits": float(result.stats.hits), "cache_misses": float(result.stats.misses)}
    items = [Param(k, v) for k, v in params.items()]
    client.log_batch(run.info.run_id, metrics=[Metric(k, v, now, 0) for k, v in values.items()], params=items[:BATCH])
    for start in range(BATCH, len(items), BATCH):
        client.log_batch(run.info.run_id, params=items[start : start + BATCH])
    client.set_terminated(run.info.run_id)
    return str(run.info.run_id)


def record(cfg: DictConfig, study: Any, summary: SweepSummary) -> None:
    """trials.csv, summary.json and Optuna's plots under artifacts/sweeps/<study>/, and all of them on
    the MLflow parent run with the best trial's value, parameters and system config."""
    folder = Path(str(cfg.paths.artifacts)) / "sweeps" / summary.study
    folder.mkdir(parents=True, exist_ok=True)
    study.trials_dataframe(attrs=("number", "value", "params", "state", "user_attrs")).to_csv(
        folder / "trials.csv", index=False
    )
    write_json(folder / "summary.json", summary.__dict__)
    plots = write_plots(study, folder)
    if summary.parent_run_id and bool(cfg.tracking.enabled):
        import mlflow

        from fixgraph.tracking import setup

        setup(cfg)
        with mlflow.start_run(run_id=summary.parent_run_id):
            if summary.best_value is not None:
                best = study.best_trial
                mlflow.log_metrics(
                    {"best_value": summary.best_value, "complete_trials": summary.complete, "pruned": summary.pruned}
                )
                mlflow.set_tags(
                    {
                        **{f"best.{k}": str(v) for k, v in summary.best_params.items()},
                        "best.trial": str(best.number),
                        "best.overrides": " ".join(redact_overrides(best.user_attrs.get("overrides", [])))[:5000],
                        "best.mlflow_run_id": str(best.user_attrs.get("mlflow_run_id", "")),
                    }
                )
                with tempfile.TemporaryDirectory() as tmp:
                    write_json(Path(tmp) / "best_system.json", redact(best.user_attrs.get("system_config", {})))
                    mlflow.log_artifact(str(Path(tmp) / "best_system.json"))
            mlflow.log_artifact(str(folder / "trials.csv"))
            mlflow.log_artifact(str(folder / "summary.json"))
            for plot in plots:
                mlflow.log_artifact(str(plot), artifact_path="plots")


def write_plots(study: Any, folder: Path) -> list[Path]:
    """Optuna's optimisation history and parameter importances (fANOVA) as PNGs; importances need at
    least two parameters and a few complete trials, and are skipped (not faked) otherwise."""
    import warnings

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.trial import TrialState
    from optuna.visualization import matplotlib as ovm

    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    written: list[Path] = []
    if not complete:
        return written
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # optuna marks its matplotlib backend experimental
        plots: dict[str, Callable[[Any], Any]] = {"history": ovm.plot_optimization_history}
        if len({k for t in complete for k in t.params}) >= 2 and len(complete) >= 4:
            plots["param_importances"] = ovm.plot_param_importances
        for name, plot in plots.items():
            try:
                axes = plot(study)
            except (ValueError, RuntimeError):  # e.g. importances of a space with a single distinct value
                continue
            figure: Any = axes.get_figure() if hasattr(axes, "get_figure") else plt.gcf()
            figure.set_size_inches(8, 5)
            figure.tight_layout()
            path = folder / f"{name}.png"
            figure.savefig(path, dpi=100)
            plt.close(figure)
            written.append(path)
    return written


def redact_overrides(overrides: list[str]) -> list[str]:
    """`llm.api_key=sk-...` -> `llm.api_key=<redacted>` (a sweep's overrides are tags of its runs)."""
    out = []
    for override in overrides:
        key, sep, value = override.partition("=")
        out.append(f"{key}={REDACTED}" if sep and value and is_secret(key.rsplit(".", 1)[-1]) else override)
    return out
