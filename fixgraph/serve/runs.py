"""The Runs tab: evaluations recorded in the MLflow store, their systems' metrics with confidence
intervals, the paired comparison each evaluation wrote (comparison.json: difference, its CI, p, p_Holm
against the baseline), and links into the MLflow UI. Read-only: nothing is logged from here.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

# where evaluations log their paired comparison: the runner's (comparison/), else the evaluation folder's
COMPARISON_ARTIFACTS = ("comparison/comparison.json", "evaluation/comparison.json")


def _client(cfg: DictConfig) -> Any:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    import mlflow

    mlflow.set_tracking_uri(str(cfg.tracking.uri))
    return mlflow.MlflowClient()


def ui_link(ui: str, experiment_id: str, run_id: str) -> str:
    return f"{ui.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"


def list_runs(cfg: DictConfig, ui: str, limit: int = 50) -> list[dict[str, Any]]:
    """Evaluation runs (parents), newest first."""
    client = _client(cfg)
    experiment = client.get_experiment_by_name(str(cfg.tracking.experiment))
    if experiment is None:
        return []
    runs = client.search_runs(
        [experiment.experiment_id],
        filter_string="tags.stage = 'evaluate'",
        order_by=["attributes.start_time DESC"],
        max_results=limit * 20,  # system runs carry the tag too; parents are kept below
    )
    out = []
    for run in runs:
        tags = run.data.tags
        if "mlflow.parentRunId" in tags:
            continue
        out.append(
            {
                "run_id": run.info.run_id,
                "name": run.info.run_name,
                "evaluation": tags.get("evaluation", ""),
                "corpus": tags.get("corpus", ""),
                "started": run.info.start_time,
                "questions": run.data.metrics.get("questions"),
                "link": ui_link(ui, experiment.experiment_id, run.info.run_id),
            }
        )
        if len(out) >= limit:
            break
    return out


def run_detail(cfg: DictConfig, ui: str, run_id: str) -> dict[str, Any]:
    """One evaluation: every system's metrics with CIs, and its paired comparison."""
    client = _client(cfg)
    try:
        run = client.get_run(run_id)
    except Exception:  # MlflowException: an unknown id
        raise KeyError(f"no MLflow run {run_id!r}") from None
    parent_id = run.data.tags.get("mlflow.parentRunId") or run_id
    parent = run if parent_id == run_id else client.get_run(parent_id)
    experiment_id = parent.info.experiment_id
    children = client.search_runs(
        [experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'", max_results=1000
    )
    systems = []
    for child in sorted(children, key=lambda r: r.info.start_time):
        metrics = child.data.metrics
        systems.append(
            {
                "system": child.data.tags.get("system", child.info.run_name),
                "run_id": child.info.run_id,
                "link": ui_link(ui, experiment_id, child.info.run_id),
                "metrics": {
                    name: {
                        "mean": value,
                        "ci_low": metrics[f"{name}_ci_low"],
                        "ci_high": metrics.get(f"{name}_ci_high"),
                    }
                    for name, value in sorted(metrics.items())
                    if f"{name}_ci_low" in metrics
                },
            }
        )
    comparison: dict[str, Any] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        for artifact in COMPARISON_ARTIFACTS:
            try:
                local = client.download_artifacts(parent_id, artifact, tmp)
            except Exception:  # not logged there (a single-system evaluation has none)
                continue
            comparison = json.loads(Path(local).read_text(encoding="utf-8"))
            break
    return {
        "run_id": parent_id,
        "name": parent.info.run_name,
        "evaluation": parent.data.tags.get("evaluation", ""),
        "corpus": parent.data.tags.get("corpus", ""),
        "link": ui_link(ui, experiment_id, parent_id),
        "systems": systems,
        "comparison": None
        if comparison is None
        else {k: comparison.get(k) for k in ("baseline", "family", "metrics", "rows", "settings")},
    }
