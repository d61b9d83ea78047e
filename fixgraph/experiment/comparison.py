"""Experiment kind `retrieval_comparison`: evaluate every system, then test each listed system against
the baseline on each listed metric with a paired permutation test; results go to comparisons.json
next to the evaluation and onto the MLflow parent run (`paired.<system>.<metric>.delta|p_value`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.config import ConfigError, systems_of
from fixgraph.evaluation.paired import PairedResult, compare_systems
from fixgraph.experiment.evaluate import EvaluationResult, evaluate
from fixgraph.experiment.runners import EXPERIMENTS
from fixgraph.io import write_json

log = logging.getLogger(__name__)


@EXPERIMENTS.register("retrieval_comparison")
class RetrievalComparison:
    def __init__(
        self,
        name: str,
        baseline: str,
        compare: Sequence[str] = (),
        metrics: Sequence[str] = ("recall_at_8", "mrr", "ndcg_at_10"),
        resamples: int = 10000,
        seed: int = 0,
        **_: Any,
    ) -> None:
        self.name = name
        self.baseline = baseline
        self.compare = list(compare)
        self.metrics = list(metrics)
        self.resamples = resamples
        self.seed = seed

    def run(
        self, cfg: DictConfig, questions: Path | None = None, name: str | None = None, track: bool | None = None
    ) -> EvaluationResult:
        systems = systems_of(cfg)
        for system in [self.baseline, *self.compare]:
            if system not in systems:
                raise ConfigError(f"experiment {self.name}: {system!r} is not one of the systems {sorted(systems)}")
        result = evaluate(cfg, questions, name, track)
        tests = [
            compare_systems(result.per_question, self.baseline, system, metric, self.resamples, self.seed)
            for system in self.compare
            for metric in self.metrics
        ]
        write_json(result.output_dir / "comparisons.json", [t.to_json() for t in tests])
        result.info["comparisons"] = [t.to_json() for t in tests]
        result.table += "\n" + comparison_table(tests)
        if result.mlflow_run_id:
            import mlflow

            with mlflow.start_run(run_id=result.mlflow_run_id):
                mlflow.log_metrics(
                    {
                        f"paired.{t.system}.{t.metric}.{field}": getattr(t, field)
                        for t in tests
                        for field in ("delta", "p_value")
                    }
                )
                mlflow.log_artifact(str(result.output_dir / "comparisons.json"))
        return result


def comparison_table(tests: Sequence[PairedResult]) -> str:
    from tabulate import tabulate

    rows = [
        [
            t.system,
            t.metric,
            f"{t.mean_baseline:.3f}",
            f"{t.mean_system:.3f}",
            f"{t.delta:+.3f}",
            f"{t.p_value:.4f}",
            f"{t.wins}/{t.losses}/{t.ties}",
        ]
        for t in tests
    ]
    head = [
        "system",
        "metric",
        f"baseline ({tests[0].baseline})" if tests else "baseline",
        "system",
        "delta",
        "p (paired permutation)",
        "wins/losses/ties",
    ]
    return tabulate(rows, headers=head, tablefmt="github") + "\n"
