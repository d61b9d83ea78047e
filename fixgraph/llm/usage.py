"""Tokens and wall time of every LLM call, summed per pipeline stage (extract, verify, summarise...)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from dataclasses import asdict, dataclass
from typing import Any

from fixgraph.collectors import collecting
from fixgraph.llm.base import Completion


@dataclass
class StageCost:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0  # measured wall time, including cache lookups
    # the backend's time for these completions when they were generated (a cached one keeps it), so a
    # rerun from the cache still reports what the stage costs
    model_seconds: float = 0.0
    cached_calls: int = 0

    def add(self, completion: Completion, seconds: float) -> None:
        self.calls += 1
        self.input_tokens += completion.input_tokens
        self.output_tokens += completion.output_tokens
        self.seconds += seconds
        self.model_seconds += completion.seconds
        self.cached_calls += int(completion.cached)


@dataclass
class StageUsage:
    calls: int = 0
    cached_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0  # wall time spent in the backend (cache hits cost none)

    def add(self, completion: Completion) -> None:
        self.calls += 1
        self.input_tokens += completion.input_tokens
        self.output_tokens += completion.output_tokens
        if completion.cached:
            self.cached_calls += 1
        else:
            self.seconds += completion.seconds


class UsageMeter:
    """Thread-safe totals per stage; cached answers count their tokens but no time."""

    def __init__(self) -> None:
        self._stages: dict[str, StageUsage] = {}
        self._lock = threading.Lock()

    def record(self, stage: str, completion: Completion) -> None:
        with self._lock:
            self._stages.setdefault(stage, StageUsage()).add(completion)

    def stage(self, name: str) -> StageUsage:
        with self._lock:
            return StageUsage(**asdict(self._stages.get(name, StageUsage())))

    def totals(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {name: asdict(usage) for name, usage in sorted(self._stages.items())}


# the meters of every `metering()` block the current context is inside
_ACTIVE: ContextVar[tuple[UsageMeter, ...]] = ContextVar("fixgraph_llm_meters", default=())


def metering() -> AbstractContextManager[UsageMeter]:
    """Every LLM call made inside the block, by any `LLMClient`, is also counted in the meter it yields.

    How a caller learns what a unit of work costs (one system's queries in an evaluation) without
    knowing which of its components call an LLM or which clients they built. Blocks nest."""
    return collecting(_ACTIVE, UsageMeter())


def active_meters() -> tuple[UsageMeter, ...]:
    return _ACTIVE.get()


def usage_metrics(totals: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """MLflow metric names: llm_<stage>_<field> (MLflow forbids some characters, so no dots or @)."""
    return {f"llm_{stage}_{key}": float(value) for stage, fields in totals.items() for key, value in fields.items()}


def log_usage_to_mlflow(totals: Mapping[str, Mapping[str, Any]]) -> None:
    """Log into the active MLflow run (the caller opens it)."""
    import mlflow

    metrics = usage_metrics(totals)
    if metrics:
        mlflow.log_metrics(metrics)
