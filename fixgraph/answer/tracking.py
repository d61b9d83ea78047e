"""MLflow record of an answers run: the evaluation's parent/child runs plus answer-specific metrics.

`fixgraph.tracking.log_evaluation` writes the parent run (config, hashes, artifacts) and one child per
system with every metric's mean and CI bounds (and, through `info["latency"]`, latency percentiles and
abstention precision/recall). Here the parent run gains the paired comparison (difference, its CI, p,
p_holm per system and metric), the LLM usage per stage, and the judge agreement when labels exist.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig

if TYPE_CHECKING:
    from fixgraph.evaluation.result import EvaluationResult


def comparison_metrics(rows: list[dict[str, Any]], baseline: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in rows:
        prefix = f"vs_{baseline}.{row['system']}.{row['metric']}"
        for key in ("diff", "diff_ci_low", "diff_ci_high", "p", "p_holm"):
            value = row.get(key)
            if value is not None and not math.isnan(float(value)) and not math.isinf(float(value)):
                out[f"{prefix}.{key}"] = float(value)
    return out


def log_answers(cfg: DictConfig, result: EvaluationResult) -> str:
    import mlflow

    from fixgraph.llm.usage import usage_metrics
    from fixgraph.tracking import log_evaluation, setup

    run_id = log_evaluation(cfg, result)
    setup(cfg)
    baseline = str(cfg.answer.get("baseline") or result.info["systems"][0])
    with mlflow.start_run(run_id=run_id):
        verifier = result.info.get("verifier") or {}
        tags = {"stage": "answers", "judge": result.info["judge"], "llm": result.info["llm"]["identity"]}
        mlflow.set_tags({**tags, "verifier_llm": verifier.get("identity", tags["llm"])})
        mlflow.log_metrics(comparison_metrics(result.info.get("comparison", []), baseline))
        mlflow.log_metrics(usage_metrics(result.info["llm"]["usage"]))
        if verifier.get("usage"):  # a verifier with its own model: llm_verifier_<stage>_<field>
            mlflow.log_metrics({f"llm_verifier_{k[4:]}": v for k, v in usage_metrics(verifier["usage"]).items()})
        agreement = result.info.get("agreement")
        if agreement:
            mlflow.log_metrics({f"judge_{k}": float(v) for k, v in agreement.items() if isinstance(v, (int, float))})
    return run_id
