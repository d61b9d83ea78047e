"""What `fixgraph serve` serves: the composed config, a study finalist, or the system of an MLflow run.

A recorded system is served exactly as it was measured, the way `fixgraph answers --study` answers
with it (`experiment.studies.finalist_config`): its recorded, resolved system config (reranker
folded in), with the recorded corpus and chunker its index depends on. Everything else (answerer,
LLM, verifier, `serve`, paths, tracking) is the live composition, overrides included. A study serves
all its recorded systems (baseline and finalists, for the Compare tab), the chosen finalist by default.
`/config` shows the origin and the recorded dev (and, once the locked test ran, test) figures.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from fixgraph.config import ConfigError, systems_of, to_dict

RECORDED = ("systems", "reranker", "corpus", "chunker")  # what a served record decides


@dataclass
class Served:
    cfg: DictConfig
    system: str  # the system /search, /ask and /diagnose use
    origin: dict[str, Any] = field(default_factory=dict)  # kind: composed | run | study, ids, figures


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


def with_recorded(live: DictConfig, systems: dict[str, Any], recorded: dict[str, Any]) -> DictConfig:
    """The live config serving `systems` (resolved, reranker folded in) on the recorded corpus and chunker."""
    chosen = to_dict(live)
    chosen.update({"systems": systems, "reranker": {"name": "none", "kind": "none"}})
    chosen.update({"corpus": recorded["corpus"], "chunker": recorded["chunker"]})
    cfg = OmegaConf.create(chosen)
    assert isinstance(cfg, DictConfig)
    return cfg


def from_study(live: DictConfig, study: str, finalist: str) -> Served:
    """A finalist (or the baseline) of a locked-test study, with the study's other systems alongside."""
    from fixgraph.experiment.locked import StudyPaths, read_finalists
    from fixgraph.experiment.studies import finalist_config

    paths = StudyPaths.of(live, study)
    record = read_finalists(paths)  # checks the record's digest: an edited record is refused
    finalist_config(live, study, finalist)  # the answers path: refuses a system the study did not record
    cfg = with_recorded(live, dict(record["config"]["systems"]), record["config"])
    figures: dict[str, Any] = {"dev": _rows(record["dev_evidence"]["comparison"], finalist)}
    looks = (
        sorted(paths.looks.glob("*/test_report.json"), key=lambda p: int(p.parent.name)) if paths.looks.exists() else []
    )
    if looks:  # the locked test already ran: show its latest look's figures, never rerun it
        report = json.loads(looks[-1].read_text(encoding="utf-8"))
        figures["test"] = _rows(report.get("rows", []), finalist)
        figures["test_look"] = int(looks[-1].parent.name)
        figures["test_looks"] = len(looks)
        figures["test_run"] = report.get("mlflow_run_id")
    origin = {
        "kind": "study",
        "study": study,
        "finalist": finalist,
        "role": _role(record, finalist),
        "recorded": record["created"],
        "git_sha": record.get("git_sha"),
        "dev_run": record["dev_evidence"].get("mlflow_run_id"),
        "from_record": list(RECORDED),
        "figures": figures,
    }
    return Served(cfg, finalist, origin)


def _rows(rows: list[dict[str, Any]], system: str) -> list[dict[str, Any]]:
    keep = ("metric", "n", "mean", "ci_low", "ci_high", "diff", "diff_ci_low", "diff_ci_high", "p", "p_holm")
    return [{k: r.get(k) for k in keep} for r in rows if r.get("system") == system]


def from_run(live: DictConfig, run_id: str) -> Served:
    """An MLflow evaluation run (its systems) or one system run of it (that system by default)."""
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
        recorded_cfg = OmegaConf.create(yaml.safe_load(Path(local).read_text(encoding="utf-8")))
    assert isinstance(recorded_cfg, DictConfig)
    recorded = {name: to_dict(node) for name, node in systems_of(recorded_cfg).items()}
    cfg = with_recorded(live, recorded, to_dict(recorded_cfg))
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
        "from_record": list(RECORDED),
        "figures": {"dev": figures} if figures else {},
    }
    return Served(cfg, default_system(cfg, system or live.serve.get("system")), origin)


def _role(record: dict[str, Any], system: str) -> str:
    """What the study recorded the system as (records written before `exploratory` existed lack it)."""
    if system == record["baseline"]:
        return "baseline"
    return "exploratory" if system in record.get("exploratory", []) else "finalist"
