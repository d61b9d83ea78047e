"""The `sweep` config group: a search space over one system's parameters, and how to search it.

    # conf/sweep/hybrid_fusion.yaml
    name: hybrid_fusion
    kind: optuna
    system: hybrid              # a key of `systems`
    objective: recall_at_8      # mean over the scored dev questions
    direction: maximize
    sampler: tpe                # tpe | grid | random
    n_trials: 100               # completed trials wanted in the study (resuming continues up to it)
    space:                      # dotted keys inside systems.<system>
      rrf_k: {type: int, low: 1, high: 200, log: true}
      depth: {type: int, low: 10, high: 100, step: 10}

Parameter types: int and float (low, high, optional step or log), categorical (choices). The grid
sampler enumerates `grid: [...]` when given, else the choices, else an int range with its step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fixgraph.evaluation.protocol_errors import SweepError
from fixgraph.registry import Registry

SAMPLERS = ("tpe", "grid", "random")


@dataclass(frozen=True)
class Param:
    key: str
    type: str  # int | float | categorical
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()
    grid: tuple[Any, ...] = ()

    def suggest(self, trial: Any) -> Any:
        if self.type == "categorical":
            return trial.suggest_categorical(self.key, list(self.choices))
        if self.type == "int":
            assert self.low is not None and self.high is not None
            return trial.suggest_int(self.key, int(self.low), int(self.high), step=int(self.step or 1), log=self.log)
        assert self.low is not None and self.high is not None
        return trial.suggest_float(self.key, float(self.low), float(self.high), step=self.step, log=self.log)

    def grid_values(self) -> list[Any]:
        if self.grid:
            return list(self.grid)
        if self.type == "categorical":
            return list(self.choices)
        if self.type == "int" and not self.log:
            assert self.low is not None and self.high is not None
            return list(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        raise SweepError(f"sweep parameter {self.key!r}: the grid sampler needs `grid: [...]` values for a {self.type}")


def parse_param(key: str, node: Mapping[str, Any]) -> Param:
    kind = str(node.get("type", ""))
    if kind not in ("int", "float", "categorical"):
        raise SweepError(f"sweep parameter {key!r}: type must be int, float or categorical, got {kind!r}")
    grid = tuple(node.get("grid") or ())
    if kind == "categorical":
        choices = tuple(node.get("choices") or ())
        if not choices:
            raise SweepError(f"sweep parameter {key!r}: categorical needs `choices`")
        return Param(key, kind, choices=choices, grid=grid)
    if node.get("low") is None or node.get("high") is None or float(node["low"]) > float(node["high"]):
        raise SweepError(f"sweep parameter {key!r}: needs low <= high")
    if node.get("log") and node.get("step") is not None:
        raise SweepError(f"sweep parameter {key!r}: `log` and `step` cannot be combined (Optuna)")
    step = node.get("step")
    return Param(
        key,
        kind,
        float(node["low"]),
        float(node["high"]),
        None if step is None else float(step),
        bool(node.get("log", False)),
        grid=grid,
    )


@dataclass(frozen=True)
class SweepSpec:
    name: str
    system: str
    objective: str
    direction: str
    sampler: str
    n_trials: int
    seed: int
    storage: str | None
    params: tuple[Param, ...] = field(default_factory=tuple)

    @property
    def keys(self) -> list[str]:
        return [p.key for p in self.params]

    def make_sampler(self, sampler: str | None = None, worker: int = 0) -> Any:
        """A fresh Optuna sampler; workers get distinct seeds so they do not propose the same points."""
        import optuna

        kind = sampler or self.sampler
        seed = self.seed + worker
        if kind == "tpe":
            return optuna.samplers.TPESampler(seed=seed)
        if kind == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        if kind == "grid":
            return optuna.samplers.GridSampler({p.key: p.grid_values() for p in self.params}, seed=seed)
        raise SweepError(f"unknown sampler {kind!r}; valid: {', '.join(SAMPLERS)}")

    def grid_size(self) -> int:
        size = 1
        for p in self.params:
            size *= len(p.grid_values())
        return size

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "system": self.system,
            "objective": self.objective,
            "direction": self.direction,
            "space": {p.key: {k: v for k, v in p.__dict__.items() if v not in (None, (), False)} for p in self.params},
        }


SWEEPS: Registry[SweepSpec] = Registry("sweep")


@SWEEPS.register("optuna")
def optuna_sweep(
    name: str,
    system: str,
    space: Mapping[str, Mapping[str, Any]],
    objective: str = "recall_at_8",
    direction: str = "maximize",
    sampler: str = "tpe",
    n_trials: int = 50,
    seed: int = 0,
    storage: str | None = None,
    **_: Any,
) -> SweepSpec:
    if direction not in ("maximize", "minimize"):
        raise SweepError(f"sweep {name}: direction must be maximize or minimize, got {direction!r}")
    if sampler not in SAMPLERS:
        raise SweepError(f"sweep {name}: unknown sampler {sampler!r}; valid: {', '.join(SAMPLERS)}")
    if not space:
        raise SweepError(f"sweep {name}: empty search space")
    if int(n_trials) < 1:
        raise SweepError(f"sweep {name}: n_trials must be >= 1")
    params = tuple(parse_param(str(key), node) for key, node in space.items())
    return SweepSpec(name, system, objective, direction, sampler, int(n_trials), int(seed), storage, params)


def build_sweep(cfg: Any) -> SweepSpec:
    from fixgraph.config import build

    return build(SWEEPS, cfg)
