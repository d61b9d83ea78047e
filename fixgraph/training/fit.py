"""The one training loop of fixgraph: lightning's Trainer around a trainer's LightningModule.

Every trainer kind (cross-encoder, bi-encoder, GNN link predictor, QLoRA generator) builds a
`FixgraphModule` and two data loaders and calls `fit`. `fit` gives all of them the same things:

- seeded and deterministic on CPU (`seed_everything`, `deterministic=True`, a fixed thread count);
- the MLflow logger on the project's store (`tracking.uri`), with the trainer config as params, the
  data hash and git sha as tags, `train_loss` per step, `val_loss` per validation and the learning rate;
- checkpoints (best by `val_loss`, and `last.ckpt`) in a work folder keyed by the stage key, so a killed
  run resumes from its last checkpoint (with its loss history: the card's losses cover the whole run)
  and a changed config never resumes a stale one;
- early stopping on `val_loss` (or another logged metric, `monitor`), measured on a validation split
  built from the corpus (never dev/test);
- the best checkpoint's weights restored into the module before the caller saves it.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from fixgraph.training.settings import FitResult, FitSettings, Tracking

log = logging.getLogger(__name__)


class FixgraphModule(pl.LightningModule):
    """A LightningModule whose checkpoints may hold only its trainable tensors (`trainable_only`): a QLoRA
    checkpoint is then its adapters (MBs), not the frozen 4-bit base model (GBs)."""

    trainable_only: bool = False

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if self.trainable_only:
            keep = {name for name, p in self.named_parameters() if p.requires_grad}
            checkpoint["state_dict"] = {k: v for k, v in checkpoint["state_dict"].items() if k in keep}

    def restore(self, state: Mapping[str, Any]) -> None:
        _, unexpected = self.load_state_dict(dict(state), strict=not self.trainable_only)
        if unexpected:
            raise RuntimeError(f"checkpoint holds tensors this model does not: {unexpected[:5]}")


class GroupRankingModule(FixgraphModule):
    """A module that scores each query of a batch against a group of candidates: `_step` gives (loss,
    scores), `_targets` the right candidate's column per row. The bi- and cross-encoder share its
    logging and its optimiser (AdamW on the trainable parameters, warm-up then linear decay)."""

    learning_rate: float
    warmup_ratio: float

    def _step(self, batch: Any) -> tuple[Any, torch.Tensor]:
        raise NotImplementedError

    def _targets(self, scores: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss, scores = self._step(batch)
        self.log("train_loss", loss, on_step=True, on_epoch=False, batch_size=len(scores))
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        loss, scores = self._step(batch)
        top1 = (scores.argmax(dim=1) == self._targets(scores)).float().mean()
        self.log("val_loss", loss, on_epoch=True, batch_size=len(scores))
        self.log("val_top1", top1, on_epoch=True, batch_size=len(scores))

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.AdamW([p for p in self.parameters() if p.requires_grad], lr=self.learning_rate)
        return warmup_then_linear(optimizer, self.warmup_ratio, int(self.trainer.estimated_stepping_batches))


def warmup_then_linear(optimizer: torch.optim.Optimizer, warmup_ratio: float, total_steps: int) -> dict[str, Any]:
    """Linear warm-up over `warmup_ratio` of the steps, then linear decay to 0 (per optimiser step)."""
    total = max(1, int(total_steps))
    warmup = max(1, int(warmup_ratio * total))

    def factor(step: int) -> float:
        return min((step + 1) / warmup, max(0.0, (total - step) / max(1, total - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class LossHistory(pl.Callback):
    """Train loss per optimiser step and val loss per validation, kept for the model card.

    Its state goes into every checkpoint, so a resumed run's card covers the whole run: without it, a
    run resumed after its last validation had no validation of its own and wrote best_val_loss NaN."""

    def __init__(self) -> None:
        self.train: list[float] = []
        self.val: list[float] = []

    def state_dict(self) -> dict[str, Any]:
        return {"train": list(self.train), "val": list(self.val)}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.train = [float(v) for v in state_dict["train"]]
        self.val = [float(v) for v in state_dict["val"]]

    def on_train_batch_end(self, trainer: pl.Trainer, module: pl.LightningModule, outputs: Any, *_: Any) -> None:
        loss = outputs["loss"] if isinstance(outputs, Mapping) else outputs
        if loss is not None:
            self.train.append(float(loss.detach()))

    def on_validation_epoch_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        value = trainer.callback_metrics.get("val_loss")
        if value is not None:
            self.val.append(float(value))


def _logger(tracking: Tracking | None) -> Any:
    if tracking is None:
        return False
    from lightning.pytorch.loggers import MLFlowLogger

    from fixgraph.tracking import flatten

    logger = MLFlowLogger(
        experiment_name=tracking.experiment,
        run_name=tracking.run_name,
        tracking_uri=tracking.uri,
        tags=dict(tracking.tags),
        artifact_location=tracking.artifact_location,
    )
    logger.log_hyperparams(flatten(dict(tracking.params)))
    return logger


def fit(
    module: FixgraphModule,
    train: Any,
    validation: Any,
    settings: FitSettings,
    work_dir: Path,
    tracking: Tracking | None = None,
) -> FitResult:
    """Train `module` on the `train` loader, early-stopping on `validation`; restore the best weights."""
    from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint

    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)  # "GPU available: False", tips
    pl.seed_everything(settings.seed, workers=True, verbose=False)
    torch.set_num_threads(max(1, settings.threads))
    checkpoints = work_dir / "checkpoints"
    last = checkpoints / "last.ckpt"
    resume = str(last) if last.exists() else None
    if resume:
        log.info("resuming from %s", resume)
    best = ModelCheckpoint(
        dirpath=checkpoints, filename="best", monitor=settings.monitor, mode=settings.mode, save_top_k=1, save_last=True
    )
    stop = EarlyStopping(monitor=settings.monitor, mode=settings.mode, patience=settings.patience)
    history = LossHistory()
    logger = _logger(tracking)
    callbacks: list[pl.Callback] = [best, stop, history]
    if logger:
        callbacks.append(LearningRateMonitor(logging_interval="step"))
    steps_per_epoch = len(train) if hasattr(train, "__len__") else None
    val_every = settings.val_every_steps
    if val_every is not None and steps_per_epoch is not None:
        val_every = min(val_every, steps_per_epoch)  # lightning refuses an interval longer than an epoch
    trainer = pl.Trainer(
        accelerator=settings.accelerator,
        devices=1,
        precision=settings.precision,  # type: ignore[arg-type]
        deterministic=settings.device() == "cpu",
        max_epochs=settings.epochs if settings.epochs > 0 else -1,
        max_steps=settings.max_steps,
        val_check_interval=val_every,
        check_val_every_n_epoch=None if val_every is not None else 1,
        gradient_clip_val=settings.gradient_clip,
        accumulate_grad_batches=settings.accumulate,
        logger=logger,
        callbacks=callbacks,
        log_every_n_steps=1,
        num_sanity_val_steps=0,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(work_dir),
    )
    module.train()  # models load in eval mode (dropout off); lightning keeps whatever mode it is given
    started = time.perf_counter()
    trainer.fit(module, train_dataloaders=train, val_dataloaders=validation, ckpt_path=resume)
    seconds = time.perf_counter() - started
    best_path = best.best_model_path or (str(last) if last.exists() else "")
    if best_path:
        state = torch.load(best_path, map_location="cpu", weights_only=False)["state_dict"]
        module.restore(state)
    run_id = logger.run_id if logger else None
    best_score = best.best_model_score
    return FitResult(
        steps=int(trainer.global_step),
        epochs=int(trainer.current_epoch),
        best_score=float(best_score) if best_score is not None else math.nan,
        best_val_loss=min(history.val, default=math.nan),
        first_val_loss=history.val[0] if history.val else math.nan,
        train_losses=history.train,
        val_losses=history.val,
        stopped_early=stop.wait_count >= stop.patience,
        resumed_from=resume,
        seconds=seconds,
        mlflow_run_id=run_id,
    )
