"""The `graph_benchmark` experiment: graph retrievers next to hybrid, with paired tests.

It makes sure the knowledge graph is built (the `graph` stage, cached when unchanged), runs the usual
evaluation of every configured system (means with bootstrap CIs), then tests each system against the
baseline question by question (fixgraph.evaluation.paired_tests) and records the table next to the
evaluation outputs and in its MLflow run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.experiment.evaluate import EvaluationResult, evaluate, headline_metrics
from fixgraph.experiment.runners import EXPERIMENTS


@EXPERIMENTS.register("graph_benchmark")
class GraphBenchmark:
    def __init__(
        self, name: str, baseline: str = "hybrid", resamples: int = 10000, seed: int = 0, alpha: float = 0.05, **_: Any
    ) -> None:
        self.name, self.baseline = name, baseline
        self.resamples, self.seed, self.alpha = resamples, seed, alpha

    def run(
        self, cfg: DictConfig, questions: Path | None = None, name: str | None = None, track: bool | None = None
    ) -> EvaluationResult:
        from fixgraph.config import ConfigError, systems_of
        from fixgraph.evaluation.paired_tests import markdown, paired_tests
        from fixgraph.experiment import graph_stage
        from fixgraph.io import write_text

        if self.baseline not in systems_of(cfg):
            raise ConfigError(f"experiment {self.name}: baseline {self.baseline!r} is not one of the systems")
        graph_stage.build(cfg, track=track)
        result = evaluate(cfg, questions, name, track)
        table = paired_tests(
            result.per_question, self.baseline, headline_metrics(cfg), self.resamples, self.seed, self.alpha
        )
        table.to_csv(result.output_dir / "paired_tests.csv", index=False)
        text = markdown(table)
        write_text(result.output_dir / "paired_tests.md", text)
        result.table = result.table + "\n" + text
        result.info["paired_tests"] = table.to_dict(orient="records")
        if result.mlflow_run_id:
            _log(result.mlflow_run_id, result.output_dir, table)
        return result


def _log(run_id: str, folder: Path, table: Any) -> None:
    import mlflow

    with mlflow.start_run(run_id=run_id):
        mlflow.log_artifact(str(folder / "paired_tests.md"))
        mlflow.log_artifact(str(folder / "paired_tests.csv"))
        mlflow.log_metrics({f"p_holm_{r.system}_{r.metric}": float(r.p_holm) for r in table.itertuples()})
