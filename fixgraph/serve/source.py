"""What `fixgraph serve` serves: the composed config, an MLflow run's recorded config, or a study finalist.

A recorded configuration (a run's config.yaml, a study's finalists.yaml) is served as it was measured,
except for the top-level sections named on the command line (`llm=qwen_coder_05b`, `serve.port=9000`
replace `llm`, `serve`), the sections the record predates (e.g. `serve`), and where to read artefacts
and track (`paths`, `tracking`), which always come from the current composition. `/config` lists
which sections came from where, so nothing about the served system is implicit.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from fixgraph.config import ConfigError, systems_of, to_dict
from fixgraph.redact import restore

log = logging.getLogger(__name__)
LIVE_SECTIONS = ("serve", "paths", "tracking")  # never taken from a record


@dataclass
class Served:
    cfg: DictConfig
    system: str  # the system /search, /ask and /diagnose use
    origin: dict[str, Any] = field(default_factory=dict)  # kind: composed | run | study, ids, figures
    overridden: list[str] = field(default_factory=list)  # top-level sections taken from the live composition


def override_sections(overrides: Sequence[str]) -> list[str]:
    """Top-level config sections a list of Hydra overrides touches: `llm=x` -> llm, `+a.b=1` -> a."""
    sections = []
    for item in overrides:
        key = item.lstrip("+~").split("=", 1)[0]
        key = key.split("@", 1)[-1] if "@" in key else key  # `+llm@answer.verify.llm=x` writes to answer
        sections.append(key.split(".", 1)[0].split("/", 1)[0])
    return list(dict.fromkeys(s for s in sections if s))


def merge_record(recorded: dict[str, Any], live: DictConfig, overrides: Sequence[str]) -> tuple[DictConfig, list[str]]:
    """The recorded config with the live composition's sections where the command line asks for them."""
    live_tree = to_dict(live)
    merged = restore(recorded, live_tree)  # redacted keys come back from the live config
    taken = [*LIVE_SECTIONS, *override_sections(overrides)]
    taken += [key for key in live_tree if key not in merged]
    taken = list(dict.fromkeys(taken))
    for key in taken:
        if key in live_tree:
            merged[key] = live_tree[key]
    return OmegaConf.create(merged), taken


def default_system(cfg: DictConfig, wanted: str | None) -> str:
    """`wanted`, else the selected `retriever` when it is one of the systems, else the first system."""
    systems = systems_of(cfg)
    if wanted:
        if wanted not in systems:
            raise ConfigError(f"serve.system={wanted!r} is not a configured system; systems: {', '.join(systems)}")
        return wanted
    selected = str(cfg.retriever.name) if "retriever" in cfg else ""
    return selected if selected in systems else next(iter(systems))


def composed(cfg: DictConfig) -> Served:
    return Served(cfg, default_system(cfg, cfg.serve.get("system")), {"kind": "composed"})


def from_study(live: DictConfig, study: str, finalist: str, overrides: Sequence[str]) -> Served:
    """A finalist of a locked-test study: its recorded config, dev evidence and (if scored) test figures."""
    from fixgraph.experiment.locked import StudyPaths, read_finalists

    paths = StudyPaths.of(live, study)
    record = read_finalists(paths)  # checks the record's digest: an edited record is refused
    candidates = [*record["finalists"], record["baseline"]]
    if finalist not in candidates:
        raise ConfigError(
            f"study {study!r} has no finalist {finalist!r}; finalists: {', '.join(record['finalists'])} "
            f"(baseline {record['baseline']})"
        )
    cfg, taken = merge_record(record["config"], live, overrides)
    figures: dict[str, Any] = {"dev": _rows(record["dev_evidence"]["comparison"], finalist)}
    if paths.report_json.exists():  # the locked test already ran: show its figures, never rerun it
        report = yaml.safe_load(paths.report_json.read_text(encoding="utf-8"))
        figures["test"] = _rows(report.get("rows", []), finalist)
        figures["test_run"] = report.get("mlflow_run_id")
    origin = {
        "kind": "study",
        "study": study,
        "finalist": finalist,
        "role": "baseline" if finalist == record["baseline"] else "finalist",
        "recorded": record["created"],
        "git_sha": record.get("git_sha"),
        "dev_run": record["dev_evidence"].get("mlflow_run_id"),
        "figures": figures,
    }
    return Served(cfg, default_system(cfg, finalist), origin, taken)


def _rows(rows: list[dict[str, Any]], system: str) -> list[dict[str, Any]]:
    keep = ("metric", "n", "mean", "ci_low", "ci_high", "diff", "diff_ci_low", "diff_ci_high", "p", "p_holm")
    return [{k: r.get(k) for k in keep} for r in rows if r.get("system") == system]


def from_run(live: DictConfig, run_id: str, overrides: Sequence[str]) -> Served:
    """An MLflow run: an evaluation (its config.yaml) or one system run of it (its parent's config)."""
    import mlflow

    from fixgraph.tracking import setup

    setup(live)
    client = mlflow.MlflowClient()
    try:
        run = client.get_run(run_id)
    except Exception as exc:  # MlflowException: an unknown id is the user's input, not a crash
        raise ConfigError(f"no MLflow run {run_id!r} in {live.tracking.uri} ({type(exc).__name__})") from None
    system = run.data.tags.get("system")
    holder = run.data.tags.get("mlflow.parentRunId") if system else None
    source_id = holder or run_id
    with tempfile.TemporaryDirectory() as tmp:
        try:
            local = client.download_artifacts(source_id, "config.yaml", tmp)
        except Exception:
            raise ConfigError(f"MLflow run {source_id} has no config.yaml artifact to serve") from None
        recorded = yaml.safe_load(Path(local).read_text(encoding="utf-8"))
    cfg, taken = merge_record(recorded, live, overrides)
    metrics = run.data.metrics
    figures = {
        name: {"mean": value, "ci_low": metrics.get(f"{name}_ci_low"), "ci_high": metrics.get(f"{name}_ci_high")}
        for name, value in sorted(metrics.items())
        if f"{name}_ci_low" in metrics
    }
    origin = {
        "kind": "run",
        "run_id": run_id,
        "config_from": source_id,
        "run_name": run.info.run_name,
        "evaluation": run.data.tags.get("evaluation"),
        "figures": {"dev": figures} if figures else {},
    }
    return Served(cfg, default_system(cfg, system or cfg.serve.get("system")), origin, taken)
