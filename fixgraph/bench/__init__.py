"""Benchmark commands: `fixgraph bench <name> [overrides]` prints one JSON object.

Each module here defines `run(cfg: DictConfig) -> dict`. Report medians (not means) and ratios against a
peer measured in the same run, since these machines are noisy; say what was measured and on what.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fixgraph.config import ConfigError


def available() -> list[str]:
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def options(cfg: DictConfig) -> dict[str, Any]:
    """A benchmark's own knobs (`+bench.x=...`, free-form in the schema) as a plain dict; {} when none."""
    node = cfg.get("bench")
    if node is None:
        return {}
    knobs = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    if not isinstance(knobs, dict):
        raise ConfigError(f"bench: expected a benchmark's options (+bench.name=value), got {knobs!r}")
    return {str(k): v for k, v in knobs.items()}


def run_benchmark(name: str, cfg: DictConfig, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Run `fixgraph/bench/<name>.py`; benchmarks that compose configs of their own also get the overrides."""
    if name not in available():
        raise KeyError(f"unknown benchmark {name!r}; available: {', '.join(available())}")
    module = importlib.import_module(f"{__name__}.{name}")
    takes_overrides = "overrides" in inspect.signature(module.run).parameters
    result: dict[str, Any] = module.run(cfg, overrides=overrides) if takes_overrides else module.run(cfg)
    return {"benchmark": name, **result}


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    """Median wall time of `fn` in milliseconds over `repeats` calls (after one warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(1000 * (time.perf_counter() - started))
    return statistics.median(times)
