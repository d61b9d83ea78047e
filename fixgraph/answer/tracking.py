"""MLflow record of an answers run: the evaluation's parent/child runs plus answer-specific metrics.

`fixgraph.tracking.log_evaluation` writes the parent run (config, hashes, artifacts) and one child per
system with every metric's mean and CI bounds (and, through `info["latency"]`, latency percentiles and
abstention precision/recall). Here the parent run gains the paired comparison (difference, its CI, p,
p_holm per system and metric), the LLM usage per stage, the judge's identity, its kappa on the graded
set and the guard's verdict (tags judge_identity, judge_model, judge_informative, judge_flags; metrics
judge_kappa, judge_kappa_ci_low/high, ...), and the agreement with labels of the run's own answers.
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


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value))


def judge_metrics(judge: dict[str, Any]) -> dict[str, float]:
    """judge_kappa (+ CI bounds), weighted kappa, exact agreement, fact agreement and the guard's checks."""
    out: dict[str, float] = {"judge_informative": float(judge["guard"]["informative"])}
    measured = judge.get("graded_set")
    if measured:
        for key in ("kappa", "kappa_linear", "exact", "matched"):
            if _finite(measured.get(key)):
                out[f"judge_{key}"] = float(measured[key])
        for key in ("kappa", "kappa_linear"):
            low, high = measured[f"{key}_ci"]
            if _finite(low) and _finite(high):
                out[f"judge_{key}_ci_low"], out[f"judge_{key}_ci_high"] = float(low), float(high)
        facts = measured.get("facts") or {}
        for key in ("kappa", "precision", "recall"):
            if _finite(facts.get(key)):
                out[f"judge_facts_{key}"] = float(facts[key])
    for key, value in judge["guard"]["checks"].items():
        if _finite(value) and key != "kappa":
            out[f"judge_guard_{key}"] = float(value)
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
        judge = result.info["judge"]
        tags = {"stage": "answers", "judge": judge["name"], "llm": result.info["llm"]["identity"]}
        mlflow.set_tags({**tags, "verifier_llm": verifier.get("identity", tags["llm"])})
        mlflow.set_tags(
            {
                "answer_llm": result.info["llm"]["name"],
                "judge_identity": judge["identity"][:5000],
                "judge_model": judge["model"] or "deterministic",
                "judge_informative": str(judge["guard"]["informative"]).lower(),
                "judge_flags": "; ".join(judge["guard"]["flags"]) or "none",
                "keyfacts": result.info["keyfacts"],
            }
        )
        mlflow.log_metrics(judge_metrics(judge))
        mlflow.log_metrics(comparison_metrics(result.info.get("comparison", []), baseline))
        mlflow.log_metrics(usage_metrics(result.info["llm"]["usage"]))
        if verifier.get("usage"):  # a verifier with its own model: llm_verifier_<stage>_<field>
            mlflow.log_metrics({f"llm_verifier_{k[4:]}": v for k, v in usage_metrics(verifier["usage"]).items()})
        agreement = result.info.get("agreement")
        if agreement:
            # agreement with labels of this run's own answers (answer.labels); judge_* is the graded set's
            mlflow.log_metrics({f"labels_{k}": float(v) for k, v in agreement.items() if _finite(v)})
    return run_id
