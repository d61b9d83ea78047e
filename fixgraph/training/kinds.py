"""The `trainer` group's registry: kind name -> Trainer class (training/base.py holds the interface).

Apart from base.py on purpose: base.py is in every trainer's code hash and every training stage's DVC
deps, so listing a new kind there retrained every model; this listing shapes no model."""

from __future__ import annotations

from fixgraph.registry import Registry
from fixgraph.training.base import Trainer

TRAINERS: Registry[Trainer] = Registry(
    "trainer",
    [
        "fixgraph.training.cross_encoder",
        "fixgraph.training.bi_encoder",
        "fixgraph.training.query_encoder",
        "fixgraph.training.link_prediction",
        "fixgraph.training.generator",
    ],
)
