"""Paired comparisons inside the runner: from an evaluation's per-question table to files, plots, MLflow.

Used by the retrieval benchmark (every system vs the experiment's baseline on its split), by the
locked test (finalists vs baseline, family from finalists.yaml) and by `fixgraph compare` (runs
picked from MLflow). Before any test, the measurement guard checks each side's input fingerprint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
from omegaconf import DictConfig

from fixgraph.evaluation.comparison import Comparison, ComparisonSettings, Family, compare
from fixgraph.experiment.fingerprint import check_pair
from fixgraph.experiment.plots import metric_with_ci, qtype_bars, recall_curves
from fixgraph.io import write_json, write_text

if TYPE_CHECKING:
    from fixgraph.evaluation.result import EvaluationResult


def family_metrics(cfg: DictConfig) -> list[str]:
    comparison = cfg.get("comparison") or {}
    return [str(m) for m in comparison.get("family_metrics", [f"recall_at_{int(cfg.evaluation.main_k)}"])]


def guard(
    fingerprints: Mapping[str, Mapping[str, str]], baseline: str, systems: Sequence[str], axis: str | None = None
) -> dict[str, list[str]]:
    """Check every system against the baseline; return system -> axes its inputs differ on."""
    return {
        system: check_pair(baseline, fingerprints.get(baseline, {}), system, fingerprints.get(system, {}), axis)
        for system in systems
        if system != baseline
    }


def scored_rows(per_question: pd.DataFrame) -> pd.DataFrame:
    return per_question[per_question["scored"].astype(bool)] if "scored" in per_question.columns else per_question


def run_comparison(
    per_question: pd.DataFrame,
    fingerprints: Mapping[str, Mapping[str, str]],
    baseline: str,
    metrics: Sequence[str],
    settings: ComparisonSettings,
    family: Family | None = None,
    family_metric_names: Sequence[str] = (),
    axis: str | None = None,
) -> tuple[Comparison, dict[str, list[str]]]:
    systems = [str(s) for s in dict.fromkeys(per_question["system"])]
    differ = guard(fingerprints, baseline, systems, axis)
    if family is None:
        family = Family.declare(baseline, systems, family_metric_names or metrics[:1])
    comparison = compare(scored_rows(per_question), metrics, baseline, systems, family, settings)
    return comparison, differ


def write_outputs(
    comparison: Comparison,
    per_question: pd.DataFrame,
    out: Path,
    differ: Mapping[str, list[str]],
    stem: str,
    plots: bool = True,
    fingerprints: Mapping[str, Mapping[str, str]] | None = None,
) -> list[Path]:
    """<stem>.md, <stem>.json, <stem>_per_query.parquet and (optionally) plots/ under `out`.

    The JSON records each side's input fingerprint and the axes it differs on from the baseline.
    """
    payload: dict[str, Any] = {
        **comparison.to_json(),
        "differing_axes": dict(differ),
        "fingerprints": {s: dict((fingerprints or {}).get(s, {})) for s in comparison.systems},
    }
    write_json(out / f"{stem}.json", payload)
    write_text(out / f"{stem}.md", comparison.markdown())
    comparison.per_query.to_parquet(out / f"{stem}_per_query.parquet", index=False)
    files = [out / f"{stem}.json", out / f"{stem}.md"]
    return files + (make_plots(comparison, per_question, out / "plots") if plots else [])


def make_plots(comparison: Comparison, per_question: pd.DataFrame, folder: Path) -> list[Path]:
    scored = scored_rows(per_question)
    scored = scored[scored["system"].isin(comparison.systems)]
    paths = [metric_with_ci(comparison.table, comparison.metrics, folder / "metrics_ci.png")]
    curve = recall_curves(scored, folder / "recall_at_k.png", comparison.systems)
    if curve is not None:
        paths.append(curve)
    if "qtype" in scored.columns:
        paths.append(qtype_bars(scored, comparison.metrics[0], folder / f"{comparison.metrics[0]}_by_qtype.png"))
    return paths


def mlflow_metrics(comparison: Comparison) -> dict[str, float]:
    """vs_<baseline>.<system>.<metric>.{diff,diff_ci_low,diff_ci_high,p,p_holm}: NaN-free."""
    out: dict[str, float] = {}
    for row in comparison.table.to_dict(orient="records"):
        if row["system"] == comparison.baseline:
            continue
        prefix = f"vs_{comparison.baseline}.{row['system']}.{row['metric']}"
        for key in ("diff", "diff_ci_low", "diff_ci_high", "p", "p_holm", "cohens_dz"):
            value = row.get(key)
            if value is not None and value == value and abs(float(value)) != float("inf"):
                out[f"{prefix}.{key}"] = float(value)
    return out


def log_to_run(cfg: DictConfig, run_id: str, comparison: Comparison, files: Sequence[Path], folder: str) -> None:
    """Attach a comparison (metrics + files, plots under <folder>/plots) to an existing MLflow run."""
    import mlflow

    from fixgraph.tracking import setup

    setup(cfg)
    with mlflow.start_run(run_id=run_id):
        mlflow.log_metrics(mlflow_metrics(comparison))
        for path in files:
            mlflow.log_artifact(str(path), artifact_path=f"{folder}/plots" if path.parent.name == "plots" else folder)


def attach_family_comparison(
    cfg: DictConfig, result: EvaluationResult, family: Family, metrics: Sequence[str], out: Path, stem: str
) -> Comparison:
    """Every system of an evaluation against the family's baseline: files under `out`, logged to its run."""
    comparison, differ = run_comparison(
        result.per_question,
        result.info["fingerprints"],
        family.baseline,
        metrics,
        ComparisonSettings.from_config(cfg),
        family,
    )
    plots = bool((cfg.get("comparison") or {}).get("plots", True))
    files = write_outputs(comparison, result.per_question, out, differ, stem, plots, result.info["fingerprints"])
    if result.mlflow_run_id:
        log_to_run(cfg, result.mlflow_run_id, comparison, files, stem)
    return comparison


def attach_comparison(cfg: DictConfig, result: EvaluationResult, baseline: str) -> Comparison:
    """The runner's comparison: the family is every other system on `comparison.family_metrics`."""
    from fixgraph.evaluation.result import headline_metrics

    declared = family_metrics(cfg)
    family = Family.declare(baseline, result.info["systems"], declared)
    metrics = list(dict.fromkeys([*declared, *headline_metrics(cfg)]))  # the family's metrics come first
    return attach_family_comparison(cfg, result, family, metrics, result.output_dir, "comparison")
