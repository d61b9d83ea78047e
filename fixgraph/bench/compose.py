"""Config composition in one process: a repeated `compose` against Hydra composing the same tree.

`compose` keeps its latest compositions, keyed by conf/'s bytes, the config name and the overrides, and
applies value overrides to the kept tree of the group choices (`fixgraph.config`). Timed: a repeated call
(`compose_kept`), a call with a value override no call had before (`compose_new_value`, a fresh
`+bench.nonce=N` each time: a sweep trial, a test's folder), and the peer, in the same run, Hydra's
composition and the resolving. Also reported: the content digest alone, which every call pays. Overrides
after the name pick the composition (`fixgraph bench compose experiment=leaderboard`); `+bench.repeats=N`,
default 5.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import partial
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fixgraph.bench import median_ms, options
from fixgraph.config import compose, compose_with_hydra, conf_digest, config_dir


def run(cfg: DictConfig, overrides: Sequence[str] = ()) -> dict[str, Any]:
    repeats = int(options(cfg).get("repeats", 5))
    root, names = config_dir(), list(overrides)

    nonces = itertools.count()

    def hydra() -> None:
        OmegaConf.resolve(compose_with_hydra(root, "config", names))

    def new_value() -> None:
        compose([*names, f"+bench.nonce={next(nonces)}"])

    medians = {
        "compose_kept": median_ms(partial(compose, names), repeats),
        "compose_new_value": median_ms(new_value, repeats),
        "hydra_compose": median_ms(hydra, repeats),
        "conf_digest": median_ms(partial(conf_digest, root), repeats),
    }
    return {
        "repeats": repeats,
        "overrides": names,
        "median_ms": {k: round(v, 1) for k, v in medians.items()},
        "compose_kept_over_hydra_compose": round(medians["compose_kept"] / medians["hydra_compose"], 3),
        "compose_new_value_over_hydra_compose": round(medians["compose_new_value"] / medians["hydra_compose"], 3),
    }
