"""`fixgraph compare`: a paired comparison of system runs already in MLflow.

Runs are named by id (an evaluation's parent run expands to its system runs) or selected by tags
(`--tag system=hybrid --tag evaluation=dev`). Each system run carries its per-question table
(per_question.csv) and its input fingerprint (fingerprint.* tags); the measurement guard checks the
fingerprints before anything is computed. The table is printed, and logged (with plots) as a new
MLflow run tagged stage=compare.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from omegaconf import DictConfig

from fixgraph.evaluation.comparison import ComparisonSettings
from fixgraph.evaluation.protocol_errors import ComparisonError
from fixgraph.experiment.comparing import mlflow_metrics, run_comparison, write_outputs
from fixgraph.experiment.fingerprint import from_tags


@dataclass
class Side:
    label: str
    run_id: str
    system: str
    per_question: pd.DataFrame
    fingerprint: dict[str, str]


def _client(cfg: DictConfig) -> Any:
    import os

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one line per run is noise
    import mlflow

    from fixgraph.tracking import setup

    setup(cfg)
    return mlflow.MlflowClient()


def resolve(client: Any, experiment_id: str, run_ids: Sequence[str], tags: Sequence[str]) -> list[Any]:
    """System runs: named ones (parents expanded to their children) and those matching every tag."""
    runs: list[Any] = []
    for run_id in run_ids:
        try:
            run = client.get_run(run_id)
        except Exception as exc:  # MlflowException: a bad id should read as a user error
            raise ComparisonError(f"no MLflow run {run_id!r} ({type(exc).__name__})") from None
        if "system" in run.data.tags:
            runs.append(run)
            continue
        children = client.search_runs(
            [run.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{run_id}'", max_results=1000
        )
        systems = [c for c in children if "system" in c.data.tags]
        if not systems:
            raise ComparisonError(f"run {run_id} is neither a system run nor an evaluation with system runs")
        runs.extend(sorted(systems, key=lambda r: r.info.start_time))
    if tags:
        clauses = []
        for tag in tags:
            key, sep, value = tag.partition("=")
            if not sep or not key:
                raise ComparisonError(f"--tag expects key=value, got {tag!r}")
            clauses.append(f"tags.`{key}` = '{value}'")
        found = client.search_runs([experiment_id], filter_string=" and ".join(clauses), max_results=1000)
        runs.extend(r for r in found if "system" in r.data.tags)
    unique = list({r.info.run_id: r for r in runs}.values())
    if len(unique) < 2:
        raise ComparisonError(f"need at least two system runs to compare, found {len(unique)}")
    return unique


def load_sides(client: Any, runs: Sequence[Any]) -> list[Side]:
    counts = Counter(r.data.tags["system"] for r in runs)
    sides = []
    with tempfile.TemporaryDirectory() as tmp:
        for run in runs:
            system = run.data.tags["system"]
            try:
                local = client.download_artifacts(run.info.run_id, "per_question.csv", tmp)
            except Exception:
                raise ComparisonError(f"run {run.info.run_id} ({system}) has no per_question.csv artifact") from None
            frame = pd.read_csv(local)
            # MLflow metric and tag names may not contain '@': label repeated systems with a dash
            label = system if counts[system] == 1 else f"{system}-{run.info.run_id[:8]}"
            frame["system"] = label
            sides.append(Side(label, run.info.run_id, system, frame, from_tags(run.data.tags)))
            Path(local).unlink()
    return sides


def compare_runs(
    cfg: DictConfig,
    run_ids: Sequence[str],
    tags: Sequence[str] = (),
    baseline: str | None = None,
    metrics: Sequence[str] | None = None,
    axis: str | None = None,
    output: Path | None = None,
    track: bool = True,
) -> str:
    from fixgraph.evaluation.result import headline_metrics
    from fixgraph.tracking import setup

    client = _client(cfg)
    sides = load_sides(client, resolve(client, setup(cfg), run_ids, tags))
    labels = [s.label for s in sides]
    base = baseline or labels[0]
    if base not in labels:
        raise ComparisonError(f"baseline {base!r} is not among {', '.join(labels)}")
    table = pd.concat([s.per_question for s in sides], ignore_index=True)
    fingerprints = {s.label: s.fingerprint for s in sides}
    wanted = list(metrics or [m for m in headline_metrics(cfg) if m in table.columns])
    comparison, differ = run_comparison(
        table,
        fingerprints,
        base,
        wanted,
        ComparisonSettings.from_config(cfg),
        family_metric_names=wanted[:1],
        axis=axis,
    )
    folder = output or Path(tempfile.mkdtemp(prefix="fixgraph-compare-"))
    folder.mkdir(parents=True, exist_ok=True)
    files = write_outputs(comparison, table, folder, differ, "comparison", fingerprints=fingerprints)
    confounds = {label: [a for a in axes if a != axis] for label, axes in differ.items() if axis}
    lines = [comparison.markdown()]
    for label, axes in differ.items():
        lines.append(f"{label} vs {base}: inputs differ on {', '.join(axes)}")
    for label, other in confounds.items():
        if other:
            lines.append(f"warning: {label} also differs from {base} on {', '.join(other)} (confounded with {axis})")
    if track:
        lines.append(f"MLflow run {_log(cfg, comparison, files, sides, base, axis)}")
    lines.append(f"files: {folder}")
    return "\n".join(lines)


def _log(
    cfg: DictConfig, comparison: Any, files: Sequence[Path], sides: Sequence[Side], base: str, axis: str | None
) -> str:
    import mlflow

    from fixgraph.tracking import git_state, setup

    experiment_id = setup(cfg)
    with mlflow.start_run(experiment_id=experiment_id, run_name=f"compare vs {base}") as run:
        mlflow.set_tags(
            {
                **git_state(),
                "stage": "compare",
                "baseline": base,
                "axis": axis or "",
                "compared_runs": ",".join(s.run_id for s in sides),
                **{f"side.{s.label}": s.run_id for s in sides},
            }
        )
        mlflow.log_metrics(mlflow_metrics(comparison))
        for path in files:
            mlflow.log_artifact(str(path), artifact_path="plots" if path.parent.name == "plots" else None)
        return str(run.info.run_id)
