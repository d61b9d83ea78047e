"""What a training run is told and what it reports: the loop's knobs (`fit:` of a trainer config), where
it logs, and its result. Kept apart from the loop (training/fit.py, lightning) so that building and
checking a trainer config imports neither torch nor lightning (seconds on every command)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

ACCELERATORS = ("cpu", "gpu", "auto")


@dataclass(frozen=True)
class FitSettings:
    """The loop's knobs, shared by every trainer config (`epochs`, `patience`, ... in conf/trainer)."""

    epochs: int
    max_steps: int = -1  # -1: `epochs` decides
    patience: int = 2  # validations without a better val_loss before stopping
    val_every_steps: int | None = None  # None: validate after each epoch
    seed: int = 0
    threads: int = 2
    gradient_clip: float | None = 1.0
    accumulate: int = 1
    accelerator: str = "cpu"  # gpu / auto when a session has one (results then are not bit-identical)
    precision: str = "32-true"
    monitor: str = "val_loss"  # what checkpointing and early stopping watch (a metric the module logs)
    mode: str = "min"  # min | max

    def __post_init__(self) -> None:
        if self.epochs < 1 and self.max_steps < 1:
            raise ValueError(f"trainer: epochs ({self.epochs}) or max_steps ({self.max_steps}) must be >= 1")
        if self.patience < 1:
            raise ValueError(f"trainer: patience must be >= 1, got {self.patience}")
        if self.mode not in ("min", "max"):
            raise ValueError(f"trainer: mode must be min or max, got {self.mode!r}")
        if self.accelerator not in ACCELERATORS:
            raise ValueError(f"trainer: unknown accelerator {self.accelerator!r}; valid: {', '.join(ACCELERATORS)}")

    def device(self) -> str:
        """Where a model must be loaded before lightning sees it: 4-bit bitsandbytes weights are quantised
        on the device they load on and cannot follow lightning's later `.to()` (their quantisation state
        stays behind), so the QLoRA trainer loads them straight onto the GPU."""
        import torch

        if self.accelerator == "cpu" or not torch.cuda.is_available():
            return "cpu"
        return "cuda"


@dataclass(frozen=True)
class Tracking:
    """Where the MLflow logger writes (None in `fit`: no logger, e.g. for unit tests)."""

    uri: str
    experiment: str
    artifact_location: str
    run_name: str
    params: Mapping[str, Any] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)


@dataclass
class FitResult:
    steps: int
    epochs: int
    best_score: float  # of the monitored metric
    best_val_loss: float
    first_val_loss: float
    train_losses: list[float]
    val_losses: list[float]
    stopped_early: bool
    resumed_from: str | None
    seconds: float
    mlflow_run_id: str | None

    def summary(self) -> dict[str, Any]:
        head, tail = self.train_losses[:10], self.train_losses[-10:]
        return {
            "steps": self.steps,
            "epochs": self.epochs,
            "first_train_loss": _mean(head),
            "last_train_loss": _mean(tail),
            "first_val_loss": self.first_val_loss,
            "best_val_loss": self.best_val_loss,
            "best_monitored": self.best_score,
            "val_losses": [round(v, 6) for v in self.val_losses],
            "stopped_early": self.stopped_early,
            "resumed_from": self.resumed_from,
            "fit_seconds": round(self.seconds, 1),
            "mlflow_run_id": self.mlflow_run_id,
        }


def _mean(values: list[float]) -> float:
    return float(sum(values) / len(values)) if values else float("nan")
