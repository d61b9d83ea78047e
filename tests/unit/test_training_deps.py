"""The training pipeline's DVC deps and fixgraph's own stage keys name the same code: a file that shapes a
model is in both (else `dvc repro` misses a change fixgraph retrains for, or the reverse), and the registry
listing is in neither (listing a new kind must not retrain every model)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from fixgraph.config import compose
from fixgraph.training import kinds
from fixgraph.training.base import SHARED_CODE
from fixgraph.training.kinds import TRAINERS

PIPELINE = Path(__file__).resolve().parents[2] / "pipelines" / "training" / "dvc.yaml"


def module_file(module: str) -> str:
    return module.replace(".", "/") + ".py"


def trainer_stages() -> dict[str, set[str]]:
    """trainer name -> the .py files its stage lists as deps (every item of a foreach stage)."""
    stages = yaml.safe_load(PIPELINE.read_text())["stages"]
    found: dict[str, set[str]] = {}
    for stage in stages.values():
        body, items = (stage["do"], stage["foreach"]) if "foreach" in stage else (stage, [None])
        match = re.search(r"--trainer (\S+)", body["cmd"])
        if not match:
            continue
        deps = {d for d in body["deps"] if d.endswith(".py")}
        for item in items:
            found[match.group(1).replace("${item}", str(item))] = deps
    return found


def test_every_training_stage_lists_the_code_its_trainer_hashes() -> None:
    trainers = compose([]).training.trainers
    stages = trainer_stages()
    assert stages, f"no `fixgraph train --trainer` stage in {PIPELINE}"
    for name, deps in stages.items():
        kind = TRAINERS.get(str(trainers[name].kind))
        hashed = {module_file(m) for m in (*SHARED_CODE, kind.__module__, *kind.code_modules)}
        assert hashed == deps, f"trainer {name}: deps lack {sorted(hashed - deps)}, key lacks {sorted(deps - hashed)}"
        assert module_file(kinds.__name__) not in hashed  # the registry's listing shapes no model
