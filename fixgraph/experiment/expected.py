"""Expected-score files (in the spirit of pyserini's two-click reproduction YAMLs).

A file under benchmarks/expected/ names a small reproducible configuration (Hydra overrides and a
question file) and the mean scores it produced when recorded. `fixgraph expected check FILE...`
reruns each configuration and fails naming every (system, metric) that moved by more than the
file's tolerance; `fixgraph expected record FILE` rewrites the expected block from a fresh run (do that
deliberately, with the reason in the commit). CI checks the fixture configuration in the default suite
and the GNOME Help one in the slow suite.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fixgraph.config import ConfigError, compose


@dataclass
class Mismatch:
    system: str
    metric: str
    expected: float | None
    actual: float | None

    def __str__(self) -> str:
        return f"{self.system}.{self.metric}: expected {self.expected}, got {self.actual}"


def load(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise ConfigError(f"{path}: expected-score file not found")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("overrides", []), list):
        raise ConfigError(f"{path}: expected a mapping with `overrides` (a list) and `expected`")
    return data


def isolated_config(spec: dict[str, Any], workdir: Path) -> Any:
    """The file's configuration with its artifacts in `workdir` and no MLflow: what a check runs."""
    overrides = [str(o) for o in spec.get("overrides", [])]
    return compose([*overrides, f"paths.artifacts={workdir / 'artifacts'}", "tracking.enabled=false"])


def scores(spec: dict[str, Any], workdir: Path) -> dict[str, dict[str, float]]:
    """Run the file's configuration in isolation (artifacts in `workdir`, no MLflow); system -> metric -> mean."""
    from fixgraph.experiment.evaluate import evaluate

    cfg = isolated_config(spec, workdir)
    questions = Path(str(spec["questions"])) if spec.get("questions") else None
    result = evaluate(cfg, questions_path=questions, name=str(spec.get("name", "expected")), track=False)
    return {system: {m: float(v["mean"]) for m, v in ms.items()} for system, ms in result.metrics.items()}


def check(path: Path) -> list[Mismatch]:
    spec = load(path)
    tolerance = float(spec.get("tolerance", 1e-9))
    expected: dict[str, dict[str, float]] = spec.get("expected") or {}
    if not expected:
        raise ConfigError(f"{path}: no `expected` scores; record them with `fixgraph expected record {path}`")
    with tempfile.TemporaryDirectory(prefix="fixgraph-expected-") as tmp:
        actual = scores(spec, Path(tmp))
    mismatches = []
    for system, metrics in expected.items():
        for metric, value in metrics.items():
            got = actual.get(system, {}).get(metric)
            if got is None or abs(got - float(value)) > tolerance:
                mismatches.append(Mismatch(system, metric, float(value), got))
    return mismatches


def record(path: Path, metrics: list[str] | None = None) -> dict[str, dict[str, float]]:
    """Fill the file's `expected` block from a fresh run (only `metrics`, or the ones already listed)."""
    from fixgraph.tracking import git_state

    spec = load(path)
    with tempfile.TemporaryDirectory(prefix="fixgraph-expected-") as tmp:
        actual = scores(spec, Path(tmp))
    keep = metrics or sorted({m for ms in (spec.get("expected") or {}).values() for m in ms}) or None
    spec["expected"] = {
        system: {m: round(v, 12) for m, v in ms.items() if keep is None or m in keep} for system, ms in actual.items()
    }
    spec["recorded"] = {"git_sha": git_state()["git_sha"]}
    header = "".join(line for line in path.read_text(encoding="utf-8").splitlines(True) if line.startswith("#"))
    path.write_text(header + yaml.safe_dump(spec, sort_keys=False, width=110), encoding="utf-8")
    return spec["expected"]
