"""The one training loop (training/fit.py) and the training-data helpers (training/data.py): a toy
regression learns, runs are bit-identical, checkpoints resume, MLflow records the curves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("lightning")

from fixgraph.config import ConfigError  # noqa: E402
from fixgraph.training.data import data_hash, save_splits, settings_from, split_rows, validation_units  # noqa: E402
from fixgraph.training.fit import FixgraphModule, fit  # noqa: E402
from fixgraph.training.settings import FitSettings, Tracking  # noqa: E402

W_TRUE = torch.tensor([[2.0, -3.0, 0.5]])


class ToyRegression(FixgraphModule):
    """y = x @ W_TRUE^T + noise, learned by one Linear layer (a frozen extra layer tests trainable_only)."""

    def __init__(self, trainable_only: bool = False) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(3, 1)
        self.frozen = torch.nn.Linear(2, 2).requires_grad_(False)
        self.trainable_only = trainable_only

    def _loss(self, batch: Any) -> Any:
        x, y = batch
        return torch.nn.functional.mse_loss(self.linear(x), y)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = self._loss(batch)
        self.log("train_loss", loss, on_step=True, on_epoch=False)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self._loss(batch), on_epoch=True)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD([p for p in self.parameters() if p.requires_grad], lr=0.2)


def _loaders(seed: int = 0) -> tuple[Any, Any]:
    from torch.utils.data import DataLoader, TensorDataset

    g = torch.Generator().manual_seed(seed)
    x = torch.randn(256, 3, generator=g)
    y = x @ W_TRUE.T + 0.01 * torch.randn(256, 1, generator=g)
    train = DataLoader(TensorDataset(x[:200], y[:200]), batch_size=16, shuffle=True, generator=g)
    return train, DataLoader(TensorDataset(x[200:], y[200:]), batch_size=56)


def _fit(tmp: Path, epochs: int = 4, tracking: Tracking | None = None, **module: Any) -> tuple[ToyRegression, Any]:
    model = ToyRegression(**module)
    train, val = _loaders()
    settings = FitSettings(epochs=epochs, patience=2, seed=3, threads=1)
    return model, fit(model, train, val, settings, tmp, tracking)


def test_toy_regression_learns_and_the_best_weights_are_restored(tmp_path: Path) -> None:
    model, result = _fit(tmp_path)
    assert result.steps == 4 * 13 and result.epochs == 4
    assert result.val_losses[-1] < 0.01 < result.first_val_loss  # it learns W_TRUE
    assert torch.allclose(model.linear.weight, W_TRUE, atol=0.1)
    assert result.best_val_loss == pytest.approx(min(result.val_losses), rel=1e-5)
    summary = result.summary()
    assert summary["last_train_loss"] < summary["first_train_loss"] and not summary["stopped_early"]


def test_runs_are_bit_identical_with_the_same_seed(tmp_path: Path) -> None:
    first, _ = _fit(tmp_path / "a")
    second, _ = _fit(tmp_path / "b")
    assert torch.equal(first.linear.weight, second.linear.weight) and torch.equal(first.linear.bias, second.linear.bias)


def test_a_killed_run_resumes_from_its_last_checkpoint(tmp_path: Path) -> None:
    _, partial = _fit(tmp_path, epochs=2)  # "killed" after two epochs: last.ckpt stays in the work folder
    assert (tmp_path / "checkpoints" / "last.ckpt").exists() and partial.resumed_from is None
    model, resumed = _fit(tmp_path, epochs=4)
    assert resumed.resumed_from == str(tmp_path / "checkpoints" / "last.ckpt")
    assert resumed.steps == 4 * 13  # counted from the checkpoint's step, not from zero
    assert torch.allclose(model.linear.weight, W_TRUE, atol=0.1)


def test_trainable_only_checkpoints_hold_only_trainable_tensors(tmp_path: Path) -> None:
    model, _ = _fit(tmp_path, epochs=1, trainable_only=True)
    state = torch.load(tmp_path / "checkpoints" / "best.ckpt", weights_only=False)["state_dict"]
    assert set(state) == {"linear.weight", "linear.bias"}
    model.restore(state)  # the frozen layer is left as it is
    with pytest.raises(RuntimeError, match="does not"):
        model.restore({**state, "ghost": torch.zeros(1)})


@pytest.mark.slow  # an MLflow sqlite store takes its schema migrations (~10 s) to create
def test_mlflow_run_holds_train_and_val_curves(tmp_path: Path) -> None:
    mlflow = pytest.importorskip("mlflow")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking = Tracking(uri, "toy", (tmp_path / "mlruns").as_uri(), "train toy", {"lr": 0.05}, {"stage": "train"})
    _, result = _fit(tmp_path / "work", epochs=2, tracking=tracking)
    client = mlflow.tracking.MlflowClient(tracking_uri=uri)
    run = client.get_run(str(result.mlflow_run_id))
    assert run.data.params["lr"] == "0.05" and run.data.tags["stage"] == "train"
    train_curve = client.get_metric_history(run.info.run_id, "train_loss")
    val_curve = client.get_metric_history(run.info.run_id, "val_loss")
    assert len(train_curve) == 26 and len(val_curve) == 2
    assert [m.value for m in val_curve] == pytest.approx(result.val_losses, rel=1e-6)


def test_fit_settings_refuse_bad_values() -> None:
    with pytest.raises(ValueError, match="patience"):
        FitSettings(epochs=1, patience=0)
    with pytest.raises(ValueError, match="accelerator"):
        FitSettings(epochs=1, accelerator="tpu")
    with pytest.raises(ConfigError, match=r"unknown key\(s\) epoch; valid keys: epochs"):
        settings_from(FitSettings, {"epoch": 3}, "trainer x: fit")


def test_validation_split_holds_out_whole_pages_by_hash() -> None:
    pages = [f"page-{i}" for i in range(200)]
    held = validation_units(pages, 0.1, "salt")
    assert held == validation_units(list(reversed(pages)), 0.1, "salt")  # order does not matter
    assert 10 <= len(held) <= 30 and held != validation_units(pages, 0.1, "other salt")
    assert validation_units(["a", "b"], 0.01, "s") and len(validation_units(["a", "b"], 0.99, "s")) == 1
    rows = [{"doc_id": p, "i": i} for i, p in enumerate(pages * 2)]
    parts = split_rows(rows, "doc_id", 0.1, "salt")
    assert {r["doc_id"] for r in parts["train"]}.isdisjoint({r["doc_id"] for r in parts["validation"]})
    assert len(parts["train"]) + len(parts["validation"]) == len(rows)


def test_saved_data_hash_is_content_hash(tmp_path: Path) -> None:
    rows = {"train": [{"q": "a", "n": [1, 2]}], "validation": [{"q": "b", "n": [3]}]}
    save_splits(rows, tmp_path / "one")
    save_splits(rows, tmp_path / "two")
    (tmp_path / "two" / "stage.json").write_text("{}")  # the stage marker holds timings: not data
    assert data_hash(tmp_path / "one") == data_hash(tmp_path / "two")
    save_splits({**rows, "validation": [{"q": "c", "n": [3]}]}, tmp_path / "three")
    assert data_hash(tmp_path / "three") != data_hash(tmp_path / "one")
    with pytest.raises(ValueError, match="validation would be empty"):
        save_splits({**rows, "validation": []}, tmp_path / "four")


class KilledToy(ToyRegression):
    """ToyRegression that records each validation's val_loss and dies at `kill_at_step` (a killed run)."""

    def __init__(self, kill_at_step: int | None) -> None:
        super().__init__()
        self.kill_at_step = kill_at_step
        self.seen_val: list[float] = []

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        if self.global_step == self.kill_at_step:
            raise RuntimeError("killed")
        return super().training_step(batch, batch_idx)

    def on_validation_epoch_end(self) -> None:
        self.seen_val.append(float(self.trainer.callback_metrics["val_loss"]))


def _toy_trainer(root: Path) -> Any:
    from fixgraph.training.base import Trainer
    from fixgraph.training.data import save_splits

    class ToyTrainer(Trainer):
        kind = "toy"

        def __init__(self) -> None:
            # 13 steps an epoch, 2 epochs, validations at steps 10 and 20 only: a run resumed from step 20
            # validates no more
            fit_cfg = {"epochs": 2, "val_every_steps": 10, "patience": 5, "seed": 3, "threads": 1}
            super().__init__("toy", str(root / "data"), str(root / "model"), {"rows": 2}, fit_cfg)
            self.kill_at_step: int | None = None  # not in the config: the killed and resumed runs share a key
            self.model: KilledToy | None = None

        def data_inputs(self, cfg: Any) -> dict[str, str]:
            return {}

        def build_data(self, cfg: Any, out: Path) -> dict[str, Any]:
            save_splits({"train": [{"q": "a"}], "validation": [{"q": "b"}]}, out)
            return {}

        def train(self, cfg: Any, data: Path, out: Path, work_dir: Path, tracking: Tracking | None) -> dict[str, Any]:
            self.model = KilledToy(self.kill_at_step)
            result = fit(self.model, *_loaders(), self.fit_settings, work_dir, tracking)
            torch.save(self.model.state_dict(), out / "model.pt")
            return result.summary()

        def model_config(self) -> dict[str, Any]:
            return {"lr": 0.2}

    return ToyTrainer()


def test_a_run_resumed_after_its_last_validation_keeps_its_best_val_loss_in_the_card(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import math

    from omegaconf import OmegaConf

    from fixgraph.io import read_json
    from fixgraph.training import stages

    toy = _toy_trainer(tmp_path)
    monkeypatch.setattr(stages, "trainer_config", lambda cfg, name=None: None)
    monkeypatch.setattr(stages, "build_trainer", lambda _: toy)
    monkeypatch.setattr(stages, "chunk", lambda cfg: None)
    cfg = OmegaConf.create({"paths": {"artifacts": str(tmp_path / "artifacts")}, "tracking": {"enabled": False}})
    toy.kill_at_step = 22  # after the validations at steps 10 and 20 (last.ckpt: step 20)
    with pytest.raises(RuntimeError, match="killed"):
        stages.train(cfg)
    recorded = toy.model.seen_val
    assert len(recorded) == 2 and not (tmp_path / "model").exists()
    toy.kill_at_step = None
    result = stages.train(cfg)
    assert result.status == "built" and result.run["resumed_from"].endswith("last.ckpt")
    assert toy.model.seen_val == []  # the resumed part (steps 20-26) had no validation of its own
    card = read_json(tmp_path / "model" / "fixgraph_model.json")
    assert card["steps"] == 26
    assert math.isfinite(card["best_val_loss"]) and card["best_val_loss"] == pytest.approx(min(recorded), rel=1e-6)
    assert card["first_val_loss"] == pytest.approx(recorded[0], rel=1e-6)
    assert card["val_losses"] == pytest.approx(recorded, abs=1e-6)  # rounded to 6 places
    assert card["best_monitored"] == pytest.approx(min(recorded), rel=1e-6)


def test_validation_top1_counts_the_rows_whose_right_candidate_scores_highest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bi-encoder's right candidate of row i is column i (in-batch negatives), the cross-encoder's is
    column 0 (each group lists its positive first); both log through GroupRankingModule.validation_step."""
    from fixgraph.training.nets.bi_encoder import BiEncoderModule
    from fixgraph.training.nets.cross_encoder import CrossEncoderModule

    scores = torch.tensor([[3.0, 1.0, 0.0], [0.0, 2.0, 1.0], [0.0, 1.0, 5.0]])  # argmax: columns 0, 1, 2
    modules = ((BiEncoderModule(None, 1e-3, 0.1, 20.0), 1.0), (CrossEncoderModule(None, 1e-3, 0.1, 1.0, 0.0), 1 / 3))
    for module, expected in modules:
        logged: dict[str, float] = {}
        monkeypatch.setattr(module, "_step", lambda batch: (torch.tensor(0.5), scores))
        monkeypatch.setattr(module, "log", lambda name, value, _into=logged, **_: _into.__setitem__(name, float(value)))
        module.validation_step(None, 0)
        assert logged == {"val_loss": 0.5, "val_top1": pytest.approx(expected)}
