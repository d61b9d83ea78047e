"""The `trainer` group's interface, shared by every kind of trainer (the registry: training/kinds.py).

A trainer config has three parts (conf/trainer/*.yaml):
- model and optimiser fields at the top level (base model, learning rate, LoRA, ...);
- `data:` what the training data depend on; the `train-data` stage's key covers exactly this block, so
  changing a learning rate never rebuilds data, and changing the data always retrains;
- `fit:` the loop's knobs (fixgraph.training.settings.FitSettings: epochs, patience, seed, threads, ...).

Each kind builds its data (`build_data` -> a DatasetDict with `train` and `validation` splits, saved by
the `train-data` stage) and trains on it (`train` -> files in the model folder + facts for its card);
the stages around them (fixgraph.training.stages) do keys, hashes, MLflow and the model card.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.io import sha256_file, stable_hash
from fixgraph.training.data import settings_from
from fixgraph.training.settings import FitSettings, Tracking

MANIFEST = "fixgraph_model.json"


# the code every trainer runs: a change here retrains every model
SHARED_CODE = (
    "fixgraph.training.base",
    "fixgraph.training.data",
    "fixgraph.training.settings",
    "fixgraph.training.fit",
)


def code_of(modules: Sequence[str]) -> str:
    """Hash of the source files of the given modules (stage keys: edit the code, rebuild the output)."""
    import importlib
    import inspect

    files = {}
    for name in sorted(set(modules)):
        source = inspect.getsourcefile(importlib.import_module(name))
        assert source is not None, name
        files[name] = sha256_file(Path(source))
    return stable_hash(files)


class Trainer(ABC):
    kind: str = ""
    # modules beyond its own whose code shapes its data or model (a change rebuilds them)
    code_modules: tuple[str, ...] = ()

    def __init__(
        self, name: str, data_dir: str, output: str, data: Mapping[str, Any] | None, fit: Mapping[str, Any] | None
    ) -> None:
        self.name = name
        self.data_dir = Path(data_dir)
        self.output = Path(output)
        self.data_config = dict(data or {})
        self.fit_settings = settings_from(FitSettings, fit, f"trainer {name}: fit")

    def prepare(self, cfg: DictConfig) -> None:  # noqa: B027 (a hook: most trainers need nothing)
        """Run the upstream stages the data need beyond the chunks (the graph, generated pairs)."""

    @abstractmethod
    def data_inputs(self, cfg: DictConfig) -> dict[str, str]:
        """Hashes of the artefacts the data are built from (chunks, documents, graph, generated pairs)."""

    @abstractmethod
    def build_data(self, cfg: DictConfig, out: Path) -> dict[str, Any]:
        """Build the DatasetDict (train / validation, ...) into `out`; return facts for the stage info."""

    @abstractmethod
    def train(
        self, cfg: DictConfig, data: Path, out: Path, work_dir: Path, tracking: Tracking | None
    ) -> dict[str, Any]:
        """Train on the data in `data`, save the model into `out`; return facts for the model card."""

    @abstractmethod
    def model_config(self) -> dict[str, Any]:
        """The top-level (model and optimiser) fields: with `data` and `fit`, what the model depends on."""

    def code_hash(self) -> str:
        return code_of((*SHARED_CODE, type(self).__module__, *self.code_modules))

    def config(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {
            "kind": self.kind,
            **self.model_config(),
            "data": self.data_config,
            "fit": asdict(self.fit_settings),
        }
