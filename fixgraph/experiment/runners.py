"""The `experiment` registry: what a run does with the composed config."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from omegaconf import DictConfig

from fixgraph.evaluation.result import EvaluationResult
from fixgraph.experiment.evaluate import evaluate
from fixgraph.registry import Registry


class ExperimentRunner(Protocol):
    name: str

    def run(
        self, cfg: DictConfig, questions: Path | None = None, name: str | None = None, track: bool | None = None
    ) -> EvaluationResult: ...


EXPERIMENTS: Registry[ExperimentRunner] = Registry("experiment")


@EXPERIMENTS.register("retrieval_benchmark")
class RetrievalBenchmark:
    """Score every configured system on the split (or a given question file) and record it."""

    def __init__(self, name: str, baseline: str | None = None, build_graph: bool = False) -> None:
        self.name = name
        self.baseline = baseline
        self.build_graph = build_graph  # graph retrievers read the knowledge graph: build it (cached) first

    def run(
        self, cfg: DictConfig, questions: Path | None = None, name: str | None = None, track: bool | None = None
    ) -> EvaluationResult:
        from fixgraph.config import ConfigError, systems_of

        if self.baseline is not None and self.baseline not in systems_of(cfg):
            raise ConfigError(f"experiment {self.name}: baseline {self.baseline!r} is not one of the systems")
        if self.build_graph:
            from fixgraph.pipeline import graph as graph_stage

            graph_stage.build(cfg, track=track)
        result = evaluate(cfg, questions, name, track)
        if self.baseline is not None and len(result.info["systems"]) > 1:
            from fixgraph.experiment.comparing import attach_comparison

            # every system against the baseline, Holm over the family declared in `comparison.family_metrics`
            comparison = attach_comparison(cfg, result, self.baseline)
            result.table += "\n" + comparison.markdown()
        return result


@EXPERIMENTS.register("answers")
class AnswersExperiment:
    """`fixgraph run experiment=answers`: grounded answers vs the closed-book baseline, judged and tested."""

    def __init__(self, name: str = "answers") -> None:
        self.name = name

    def run(
        self, cfg: DictConfig, questions: Path | None = None, name: str | None = None, track: bool | None = None
    ) -> EvaluationResult:
        from fixgraph.answer.run import run_answers

        return run_answers(cfg, questions, name, track)


def build_experiment(cfg: Any) -> ExperimentRunner:
    from fixgraph.config import build

    return build(EXPERIMENTS, cfg)
