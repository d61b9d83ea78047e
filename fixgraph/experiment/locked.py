"""The locked-test protocol: finalists are chosen on dev and written down before test is scored once.

1. `fixgraph finalists --study S --finalists a,b` scores the baseline and the finalists on the dev
   part, and writes experiments/S/finalists.yaml: the full resolved config the test will use, the
   Holm family (finalists x family metrics, never the baseline), the split digest, and the dev evidence.
2. `fixgraph test --study S` verifies finalists.yaml (self-digest) and the split (unchanged since the
   finalists, every question unedited), scores the recorded config on the test part, compares each
   finalist with the baseline (difference, CI, p, p_Holm), writes experiments/S/test_report.{md,json}
   and logs it all to MLflow. A second test run is refused unless `--force-reason "..."` is given;
   every attempt and its reason is appended to experiments/S/test_log.jsonl.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from fixgraph.config import ConfigError, systems_of, to_dict
from fixgraph.evaluation.comparison import Family
from fixgraph.evaluation.protocol_errors import ProtocolError
from fixgraph.evaluation.result import EvaluationResult, headline_metrics
from fixgraph.evaluation.splitting import read_split_file, unlocked_test_split
from fixgraph.experiment.comparing import attach_family_comparison
from fixgraph.experiment.evaluate import evaluate
from fixgraph.io import sha256_file, stable_hash, write_json, write_text
from fixgraph.tracking import git_state

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StudyPaths:
    root: Path

    @classmethod
    def of(cls, cfg: DictConfig, study: str) -> StudyPaths:
        if not study or "/" in study or study.startswith("."):
            raise ProtocolError(f"invalid study name {study!r}")
        return cls(Path(str(cfg.paths.get("experiments", "experiments"))) / study)

    @property
    def finalists(self) -> Path:
        return self.root / "finalists.yaml"

    @property
    def log(self) -> Path:
        return self.root / "test_log.jsonl"

    @property
    def report_md(self) -> Path:
        return self.root / "test_report.md"

    @property
    def report_json(self) -> Path:
        return self.root / "test_report.json"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _with_digest(record: dict[str, Any]) -> dict[str, Any]:
    return {**record, "digest": stable_hash({k: v for k, v in record.items() if k != "digest"})}


def read_finalists(paths: StudyPaths) -> dict[str, Any]:
    if not paths.finalists.exists():
        raise ProtocolError(
            f"{paths.finalists} not found: record the finalists on dev first (`fixgraph finalists --study "
            f"{paths.root.name} --finalists a,b`)"
        )
    record = yaml.safe_load(paths.finalists.read_text(encoding="utf-8"))
    if not isinstance(record, dict) or "digest" not in record:
        raise ProtocolError(f"{paths.finalists}: not a finalists record")
    if _with_digest(record)["digest"] != record["digest"]:
        raise ProtocolError(f"{paths.finalists} was edited after it was recorded (digest mismatch)")
    return record


def attempts(paths: StudyPaths) -> list[dict[str, Any]]:
    if not paths.log.exists():
        return []
    return [json.loads(line) for line in paths.log.read_text(encoding="utf-8").splitlines() if line.strip()]


def _append_log(paths: StudyPaths, entry: dict[str, Any]) -> None:
    paths.root.mkdir(parents=True, exist_ok=True)
    with open(paths.log, "a", encoding="utf-8") as fh:  # append-only: earlier attempts are never rewritten
        fh.write(json.dumps(entry, sort_keys=True) + "\n")


def record_finalists(
    cfg: DictConfig,
    study: str,
    finalists: list[str],
    baseline: str | None = None,
    family_metrics: list[str] | None = None,
    replace: bool = False,
    track: bool | None = None,
    extra_systems: dict[str, Any] | None = None,
) -> tuple[Path, EvaluationResult]:
    """Score baseline + finalists on dev and write finalists.yaml with the evidence. `extra_systems`
    (name -> resolved system config, e.g. a sweep's best trials) adds finalists to the configured ones."""
    paths = StudyPaths.of(cfg, study)
    if any(a.get("status") == "completed" for a in attempts(paths)):
        raise ProtocolError(f"study {study!r} has already been scored on test; finalists can no longer change")
    if paths.finalists.exists() and not replace:
        raise ProtocolError(f"{paths.finalists} exists; pass --replace to choose again (before any test run)")
    split = cfg.split
    if str(split.get("kind")) != "frozen" or str(split.get("part")) != "dev":
        raise ProtocolError(f"finalists are chosen on the dev part of a frozen split, not split={split.name}")
    baseline = baseline or cfg.experiment.get("baseline")
    if not baseline:
        raise ConfigError("no baseline: set experiment.baseline or pass --baseline")
    systems = {**systems_of(cfg), **{k: OmegaConf.create(v) for k, v in (extra_systems or {}).items()}}
    unknown = [s for s in [baseline, *finalists] if s not in systems]
    if unknown:
        raise ConfigError(f"unknown system(s) {', '.join(unknown)}; configured: {', '.join(systems)}")
    if baseline in finalists:
        raise ProtocolError(f"the baseline {baseline!r} cannot be one of the finalists it is compared with")
    chosen = [baseline, *finalists]
    resolved = to_dict(cfg)
    resolved["systems"] = {name: to_dict(systems[name]) for name in chosen}
    resolved["reranker"] = {"name": "none", "kind": "none"}  # systems_of folded it into each system above
    cfg = OmegaConf.create(resolved)
    metrics = family_metrics or [str(m) for m in cfg.comparison.family_metrics]
    family = Family.declare(baseline, chosen, metrics)
    reported = list(dict.fromkeys([*metrics, *headline_metrics(cfg)]))  # family metrics first
    result = evaluate(cfg, name=f"finalists-{study}", track=track)
    comparison = attach_family_comparison(cfg, result, family, reported, result.output_dir, "comparison")
    split_file = read_split_file(Path(str(split.file)))
    record = _with_digest(
        {
            "study": study,
            "created": _now(),
            **git_state(),
            "baseline": baseline,
            "finalists": finalists,
            "family": family.to_dict(),
            "metrics": reported,
            "split": {"file": str(split.file), "digest": split_file.digest, "test_ids": split_file.ids("test")},
            "config": OmegaConf.to_container(cfg, resolve=True),
            "dev_evidence": {
                "evaluation": str(result.output_dir),
                "mlflow_run_id": result.mlflow_run_id,
                "questions": result.info["questions"],
                "scored_questions": result.info["scored_questions"],
                "fingerprints": result.info["fingerprints"],
                "comparison": comparison.to_json()["rows"],
            },
        }
    )
    paths.root.mkdir(parents=True, exist_ok=True)
    write_text(paths.finalists, yaml.safe_dump(record, sort_keys=False, allow_unicode=True))
    write_text(paths.root / "dev_evidence.md", comparison.markdown())
    return paths.finalists, result


def run_test(
    cfg: DictConfig, study: str, force_reason: str | None = None, track: bool | None = None
) -> tuple[Path, EvaluationResult]:
    """Score the recorded finalists once on the locked test part (see module docstring)."""
    paths = StudyPaths.of(cfg, study)
    record = read_finalists(paths)
    done = [a for a in attempts(paths) if a.get("status") == "completed"]
    if done and not (force_reason and force_reason.strip()):
        raise ProtocolError(
            f"study {study!r} was already scored on test at {done[0]['time']} (run {done[0].get('mlflow_run_id')}); "
            'a second look needs --force-reason "why", which is recorded'
        )
    finalists_sha = sha256_file(paths.finalists)
    if done and done[0].get("finalists_sha256") != finalists_sha:
        raise ProtocolError(f"{paths.finalists} changed since the first test run; the record no longer holds")
    test_cfg = OmegaConf.create(record["config"])
    split_file = Path(str(record["split"]["file"]))
    if read_split_file(split_file).digest != record["split"]["digest"]:
        raise ProtocolError(f"{split_file} changed since the finalists were recorded; refusing to score test")
    test_cfg.split = OmegaConf.create({**to_dict(test_cfg.split), "name": "test", "part": "test"})
    # the recorded config decides everything but these: where to write and where to track
    for key in ("paths", "tracking"):
        test_cfg[key] = cfg[key]
    attempt = {
        "time": _now(),
        "study": study,
        "forced": bool(done),
        "force_reason": force_reason,
        "finalists_sha256": finalists_sha,
        **git_state(),
    }
    _append_log(paths, {**attempt, "status": "started"})
    with unlocked_test_split(study):
        result = evaluate(test_cfg, name=f"test-{study}", track=track)
    family = Family.from_dict(record["family"])
    comparison = attach_family_comparison(test_cfg, result, family, list(record["metrics"]), paths.root, "test_report")
    report = {
        "study": study,
        "attempt": attempt,
        "evaluation": str(result.output_dir),
        "mlflow_run_id": result.mlflow_run_id,
        "questions": result.info["questions"],
        "scored_questions": result.info["scored_questions"],
        "dev_evidence": record["dev_evidence"]["comparison"],
        **comparison.to_json(),
    }
    write_json(paths.report_json, report)
    header = f"# Locked test: {study}\n\n{result.info['questions']} test questions; finalists of {record['created']}"
    if done:
        header += f"\n\n**Forced re-run** (look number {len(done) + 1} at the test split): {force_reason}"
    write_text(paths.report_md, header + "\n\n" + comparison.markdown())
    if result.mlflow_run_id:
        _tag_run(test_cfg, result.mlflow_run_id, study, attempt, paths)
    _append_log(paths, {**attempt, "status": "completed", "mlflow_run_id": result.mlflow_run_id})
    return paths.report_md, result


def _tag_run(cfg: DictConfig, run_id: str, study: str, attempt: dict[str, Any], paths: StudyPaths) -> None:
    import mlflow

    from fixgraph.tracking import setup

    setup(cfg)
    with mlflow.start_run(run_id=run_id):
        mlflow.set_tags(
            {
                "stage": "locked_test",
                "study": study,
                "forced": str(attempt["forced"]).lower(),
                "force_reason": attempt["force_reason"] or "",
            }
        )
        mlflow.log_artifact(str(paths.finalists), artifact_path="study")
        mlflow.log_artifact(str(paths.report_json), artifact_path="study")
        mlflow.log_artifact(str(paths.report_md), artifact_path="study")
