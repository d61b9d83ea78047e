"""The `sweep` config group: a search space over any config axis, and how to search it.

    # conf/sweep/systems.yaml
    name: systems
    kind: optuna
    system: null                 # the system scored (a key of `systems`); null: the only one
    objective: recall_at_8       # mean over the scored dev questions
    direction: maximize
    sampler: tpe                 # tpe | random | grid
    pruner: median               # none | median (trials report their running mean per question batch)
    n_trials: 100
    base: [experiment=single]    # overrides every trial starts from
    space:                       # Hydra override keys -> Hydra sweep syntax (as hydra-optuna-sweeper)
      retriever: choice(dense, dense_mpnet, hybrid_weighted)       # a config group: a categorical
      reranker: choice(none, mpnet)
      retriever.rrf_k:                                             # a value, only where it applies
        values: tag(log, int(interval(1, 200)))
        when: {retriever.fusion: rrf}
      retriever.weights.bm25: {values: interval(0.05, 1.0), when: {retriever.fusion: weighted}}

The same expressions work on the command line, where they replace the space of the sweep option:
`fixgraph sweep 'retriever=choice(dense,hybrid_weighted)' 'retriever.rrf_k=int(interval(1,200))'`.
Values: `choice(a, b, ...)` (categorical), `interval(lo, hi)` (float; `int(...)` for integers),
`range(start, stop, step)` (integers), `tag(log, ...)` (log scale). A parameter with `when` is
suggested only when every named key of the config composed so far holds one of the given values
(Optuna's define-by-run conditional spaces). The grid sampler enumerates choices and ranges, and needs
`grid: [...]` for an interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fixgraph.evaluation.protocol_errors import SweepError
from fixgraph.registry import Registry

SAMPLERS = ("tpe", "grid", "random")
PRUNERS = ("none", "median")
# Keys a trial may not change: they define what is measured and where, not the system under test.
FIXED = ("split", "splitting", "corpus", "evaluation", "paths", "tracking", "sweep", "experiment", "seed")


@dataclass(frozen=True)
class Param:
    key: str
    kind: str  # categorical | int | float
    choices: tuple[Any, ...] = ()
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    when: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    grid: tuple[Any, ...] = ()
    expression: str = ""  # as written (what workers are handed)

    def suggest(self, trial: Any) -> Any:
        if self.kind == "categorical":
            return trial.suggest_categorical(self.key, list(self.choices))
        assert self.low is not None and self.high is not None
        if self.kind == "int":
            step = int(self.step or 1)
            return trial.suggest_int(self.key, int(self.low), int(self.high), step=step, log=self.log)
        return trial.suggest_float(self.key, float(self.low), float(self.high), step=self.step, log=self.log)

    def override(self, value: Any) -> str:
        return f"{self.key}={value!r}" if isinstance(value, str) and not _plain(value) else f"{self.key}={value}"

    def active(self, cfg: DictConfig) -> bool:
        """True when every `when` condition holds in `cfg` (the config composed from earlier choices)."""
        return all(OmegaConf.select(cfg, key, default=None) in values for key, values in self.when)

    def grid_values(self) -> list[Any]:
        if self.grid:
            return list(self.grid)
        if self.kind == "categorical":
            return list(self.choices)
        if self.kind == "int" and not self.log:
            assert self.low is not None and self.high is not None
            return list(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        raise SweepError(f"sweep parameter {self.key!r}: the grid sampler needs `grid: [...]` values for a {self.kind}")

    def describe(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("key", "expression") and v not in (None, (), False)}
        if self.when:
            out["when"] = {k: list(v) for k, v in self.when}
        return out


def _plain(value: str) -> bool:
    return value.replace("_", "").replace("-", "").replace(".", "").isalnum()


def parse_values(key: str, expression: str) -> Param:
    """A Hydra sweep expression (`choice(...)`, `interval(...)`, `range(...)`, `tag(log, ...)`) as a Param."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep
    from hydra.errors import HydraException

    try:
        override = OverridesParser.create().parse_override(f"{key}={expression}")
    except HydraException as exc:
        raise SweepError(f"sweep parameter {key!r}: cannot parse {expression!r}: {exc}") from None
    value = override.value()
    log = "log" in getattr(value, "tags", set())
    if isinstance(value, ChoiceSweep):
        if not value.list:
            raise SweepError(f"sweep parameter {key!r}: choice() needs at least one value")
        return Param(key, "categorical", choices=tuple(value.list), expression=expression)
    if isinstance(value, RangeSweep):
        assert value.start is not None and value.stop is not None
        # range's stop is exclusive, Optuna's high inclusive: the last value the range yields
        step = value.step or 1
        count = max(int(-(-(value.stop - value.start) // step)), 1)  # ceil((stop - start) / step)
        ints = all(isinstance(v, int) for v in (value.start, value.stop, step))
        high = value.start + (count - 1) * step
        kind = "int" if ints else "float"
        high = high if ints else round(high, 10)
        return Param(key, kind, low=value.start, high=high, step=None if log else step, log=log, expression=expression)
    if isinstance(value, IntervalSweep):
        assert value.start is not None and value.end is not None
        if value.start > value.end:
            raise SweepError(f"sweep parameter {key!r}: interval needs low <= high, got {expression!r}")
        kind = "int" if isinstance(value.start, int) and isinstance(value.end, int) else "float"
        return Param(key, kind, low=value.start, high=value.end, log=log, expression=expression)
    raise SweepError(f"sweep parameter {key!r}: {expression!r} is not a sweep (use choice, interval or range)")


def parse_param(key: str, node: Any) -> Param:
    """One `space` entry: an expression, or {values: expression, when: {key: value(s)}, grid: [...]}."""
    if isinstance(node, str):
        param = parse_values(key, node)
    elif isinstance(node, Mapping):
        unknown = set(node) - {"values", "when", "grid"}
        if unknown or "values" not in node:
            raise SweepError(f"sweep parameter {key!r}: takes values, when and grid; got {sorted(node)}")
        param = parse_values(key, str(node["values"]))
        when = tuple(
            (str(k), tuple(v) if isinstance(v, list | tuple) else (v,)) for k, v in (node.get("when") or {}).items()
        )
        param = Param(**{**param.__dict__, "when": when, "grid": tuple(node.get("grid") or ())})
    else:
        raise SweepError(f"sweep parameter {key!r}: expected an expression or a mapping, got {node!r}")
    if key.split(".")[0].lstrip("+") in FIXED:
        raise SweepError(f"sweep parameter {key!r}: {key.split('.')[0]} is fixed for a study (it defines the measure)")
    return param


def split_sweep_overrides(overrides: Sequence[str]) -> tuple[list[str], list[Param]]:
    """Command-line overrides: plain ones (composed into the base) and sweep expressions (the space)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    plain: list[str] = []
    params: list[Param] = []
    for text in overrides:
        override = parser.parse_override(text)
        if override.is_sweep_override():
            params.append(parse_param(override.get_key_element(), text.split("=", 1)[1]))
        else:
            plain.append(text)
    return plain, params


@dataclass(frozen=True)
class SweepSpec:
    name: str
    system: str | None
    objective: str
    direction: str
    sampler: str
    pruner: str
    n_trials: int
    seed: int
    storage: str | None
    base: tuple[str, ...] = ()
    params: tuple[Param, ...] = field(default_factory=tuple)

    @property
    def keys(self) -> list[str]:
        return [p.key for p in self.params]

    def with_params(self, params: Sequence[Param], keep_system: bool = False) -> SweepSpec:
        """The spec with its space replaced by sweep expressions given on the command line; the system
        scored is then the trial's only one, unless `keep_system` (`sweep.system=NAME` was given too)."""
        if not params:
            return self
        return SweepSpec(**{**self.__dict__, "params": tuple(params), "system": self.system if keep_system else None})

    def make_sampler(self, sampler: str | None = None, worker: int = 0) -> Any:
        """A fresh Optuna sampler; workers get distinct seeds so they do not propose the same points."""
        import warnings

        import optuna

        kind = sampler or self.sampler
        seed = self.seed + worker
        if kind == "tpe":
            with warnings.catch_warnings():  # multivariate/group TPE handles conditional spaces; "experimental"
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                conditional = any(p.when for p in self.params)
                return optuna.samplers.TPESampler(seed=seed, multivariate=conditional, group=conditional)
        if kind == "random":
            return optuna.samplers.RandomSampler(seed=seed)
        if kind == "grid":
            return optuna.samplers.GridSampler({p.key: p.grid_values() for p in self.params}, seed=seed)
        raise SweepError(f"unknown sampler {kind!r}; valid: {', '.join(SAMPLERS)}")

    def make_pruner(self) -> Any:
        import optuna

        if self.pruner == "median":
            return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=1)
        return optuna.pruners.NopPruner()

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
            "base": list(self.base),
            "space": {p.key: p.describe() for p in self.params},
        }


SWEEPS: Registry[SweepSpec] = Registry("sweep")


@SWEEPS.register("optuna")
def optuna_sweep(
    name: str,
    space: Mapping[str, Any],
    system: str | None = None,
    objective: str = "recall_at_8",
    direction: str = "maximize",
    sampler: str = "tpe",
    pruner: str = "none",
    n_trials: int = 50,
    seed: int = 0,
    storage: str | None = None,
    base: Sequence[str] = (),
) -> SweepSpec:
    if direction not in ("maximize", "minimize"):
        raise SweepError(f"sweep {name}: direction must be maximize or minimize, got {direction!r}")
    if sampler not in SAMPLERS:
        raise SweepError(f"sweep {name}: unknown sampler {sampler!r}; valid: {', '.join(SAMPLERS)}")
    if pruner not in PRUNERS:
        raise SweepError(f"sweep {name}: unknown pruner {pruner!r}; valid: {', '.join(PRUNERS)}")
    if int(n_trials) < 1:
        raise SweepError(f"sweep {name}: n_trials must be >= 1")
    params = tuple(parse_param(str(key), node) for key, node in (space or {}).items())
    return SweepSpec(
        name, system, objective, direction, sampler, pruner, int(n_trials), int(seed), storage, tuple(base), params
    )


def build_sweep(cfg: Any) -> SweepSpec:
    from fixgraph.config import build

    return build(SWEEPS, cfg)
