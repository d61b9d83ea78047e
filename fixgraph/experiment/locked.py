"""The locked-test protocol: finalists are chosen on dev and written down before test is scored once.

1. `fixgraph finalists --study S --finalists a,b` scores the baseline and the finalists on the dev
   part, and writes experiments/S/finalists.yaml: the full resolved config the test will use, the
   Holm family (finalists x family metrics, never the baseline), the split digest, and the dev evidence.
2. `fixgraph test --study S` verifies finalists.yaml (self-digest) and the split (unchanged since the
   finalists, every question unedited, its history as the ledger last saw it), scores the recorded
   config on the test part, compares each finalist with the baseline (difference, CI, p, p_Holm),
   writes experiments/S/test_looks/<n>/test_report.{md,json} (numbered, never overwritten) and logs
   it all to MLflow. A second look is refused unless `--force-reason "..."` is given. Every attempt,
   refused, failed or completed, with or without MLflow tracking, is one entry of the hash-chained
   ledger experiments/locked_test_ledger.jsonl (ledger.py), checked against the numbered reports
   and the MLflow runs tagged `stage=locked_test` before each new attempt.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from fixgraph.config import ConfigError, systems_of, to_dict
from fixgraph.evaluation.comparison import Family
from fixgraph.evaluation.protocol_errors import ProtocolError, SplitError
from fixgraph.evaluation.result import EvaluationResult, headline_metrics
from fixgraph.evaluation.splitting import read_split_file, unlocked_test_split
from fixgraph.experiment.comparing import attach_family_comparison
from fixgraph.experiment.evaluate import evaluate
from fixgraph.experiment.ledger import Ledger, LedgerError, check_witnesses, completed, migrate_legacy_log
from fixgraph.io import atomic_dir, sha256_file, stable_hash, write_json, write_text
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
    def ledger(self) -> Ledger:
        return Ledger.at(self.root.parent)

    @property
    def legacy_log(self) -> Path:
        """Where looks were logged before the ledger (migrated into it on the next attempt)."""
        return self.root / "test_log.jsonl"

    @property
    def looks(self) -> Path:
        """One numbered folder per completed look: test_looks/<n>/test_report.{md,json}."""
        return self.root / "test_looks"


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
    """The study's ledger entries (every attempt, numbered), after migrating a legacy log."""
    migrate_legacy_log(paths.ledger, paths.root.name, paths.legacy_log, paths.looks)
    return paths.ledger.study(paths.root.name)


def record_finalists(
    cfg: DictConfig,
    study: str,
    finalists: list[str],
    baseline: str | None = None,
    family_metrics: list[str] | None = None,
    replace: bool = False,
    track: bool | None = None,
    extra_systems: dict[str, Any] | None = None,
    exploratory: list[str] | None = None,
) -> tuple[Path, EvaluationResult]:
    """Score baseline + finalists on dev and write finalists.yaml with the evidence. `extra_systems`
    (name -> resolved system config, e.g. a sweep's best trials) adds finalists to the configured ones.
    `exploratory` systems are recorded and scored with them (on dev and in every test look) but stay out
    of the Holm family: their tests are reported uncorrected, as exploratory, and claim nothing."""
    exploratory = list(exploratory or [])
    paths = StudyPaths.of(cfg, study)
    if completed(attempts(paths)):
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
    unknown = [s for s in [baseline, *finalists, *exploratory] if s not in systems]
    if unknown:
        raise ConfigError(f"unknown system(s) {', '.join(unknown)}; configured: {', '.join(systems)}")
    if baseline in finalists:
        raise ProtocolError(f"the baseline {baseline!r} cannot be one of the finalists it is compared with")
    if both := [s for s in exploratory if s in finalists or s == baseline]:
        raise ProtocolError(f"{', '.join(both)}: a system is the baseline, a finalist or exploratory, not two of them")
    chosen = [baseline, *finalists, *exploratory]
    resolved = to_dict(cfg)
    resolved["systems"] = {name: to_dict(systems[name]) for name in chosen}
    resolved["reranker"] = {"name": "none", "kind": "none"}  # systems_of folded it into each system above
    cfg = OmegaConf.create(resolved)
    metrics = family_metrics or [str(m) for m in cfg.comparison.family_metrics]
    family = Family.declare(baseline, finalists, metrics)
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
            "exploratory": exploratory,
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
    """Score the recorded finalists once on the locked test part (see module docstring). Every attempt,
    refused, failed or completed, is one numbered ledger entry; a completed look writes its own report."""
    paths = StudyPaths.of(cfg, study)
    ledger = paths.ledger
    migrate_legacy_log(ledger, study, paths.legacy_log, paths.looks)
    check_witnesses(ledger, study, paths.looks, mlflow_looks(cfg, study))
    done = completed(ledger.study(study))
    attempt: dict[str, Any] = {
        "time": _now(),
        "study": study,
        "forced": bool(done),
        "force_reason": force_reason,
        **git_state(),
    }
    try:
        record, split_file = _admit(paths, done, force_reason)
        attempt["finalists_sha256"] = sha256_file(paths.finalists)
        attempt.update(_split_seal(split_file))
        look = len(done) + 1
        look_dir = paths.looks / str(look)
        if look_dir.exists():
            raise LedgerError(
                f"{look_dir} exists but the ledger records {len(done)} look(s): restore the ledger from git"
            )
        test_cfg = OmegaConf.create(record["config"])
        # (exclude_locked: records written before the key existed lack it; the test part never drops any)
        test_split = {**to_dict(test_cfg.split), "name": "test", "part": "test", "exclude_locked": False}
        test_cfg.split = OmegaConf.create(test_split)
        # the recorded config decides everything but these: where to write and where to track
        for key in ("paths", "tracking"):
            test_cfg[key] = cfg[key]
        with unlocked_test_split(study):
            result = evaluate(test_cfg, name=f"test-{study}-look{look}", track=track)
    except (ProtocolError, SplitError) as exc:
        ledger.append({**attempt, "outcome": "refused", "reason": str(exc)})
        raise
    except Exception as exc:
        ledger.append({**attempt, "outcome": "failed", "reason": f"{type(exc).__name__}: {exc}"})
        raise
    scored = {
        **attempt,
        "outcome": "completed",  # the test part was scored: this is a look, whatever happens next
        "look": look,
        "evaluation": str(result.output_dir),
        "questions": result.info["questions"],
        "mlflow_run_id": result.mlflow_run_id,
        "tracked": result.mlflow_run_id is not None,
    }
    try:
        report_md = _write_report(test_cfg, record, result, look_dir, {**attempt, "look": look}, force_reason)
        if result.mlflow_run_id:
            files = [paths.finalists, *look_dir.glob("test_report.*")]
            _tag_run(test_cfg, result.mlflow_run_id, study, {**attempt, "look": look}, files)
    except Exception as exc:
        ledger.append({**scored, "report": None, "reason": f"report not written: {type(exc).__name__}: {exc}"})
        raise
    report_json = look_dir / "test_report.json"
    report = {"report": report_json.relative_to(paths.root).as_posix(), "report_sha256": sha256_file(report_json)}
    ledger.append({**scored, **report})
    return report_md, result


def _admit(paths: StudyPaths, done: list[dict[str, Any]], force_reason: str | None) -> tuple[dict[str, Any], Path]:
    """The finalists record and split file of a look that may go ahead; ProtocolError saying why not."""
    record = read_finalists(paths)
    if done and not (force_reason and force_reason.strip()):
        raise ProtocolError(
            f"study {paths.root.name!r} was already scored on test {len(done)} time(s), first at {done[0]['time']} "
            f"(run {done[0].get('mlflow_run_id')}); "
            'another look needs --force-reason "why", which is recorded'
        )
    if done and done[0].get("finalists_sha256") != sha256_file(paths.finalists):
        raise ProtocolError(f"{paths.finalists} changed since the first test run; the record no longer holds")
    split_file = Path(str(record["split"]["file"]))
    split = read_split_file(split_file)
    if split.digest != record["split"]["digest"]:
        raise ProtocolError(f"{split_file} changed since the finalists were recorded; refusing to score test")
    for earlier in done:
        length, digest = earlier.get("split_history_len"), earlier.get("split_history_digest")
        if length is not None and stable_hash(split.history[:length]) != digest:
            raise ProtocolError(
                f"{split_file}: its history was rewritten since look {earlier.get('look')} "
                "(the ledger recorded another history); refusing to score test"
            )
    return record, split_file


def _split_seal(split_file: Path) -> dict[str, Any]:
    split = read_split_file(split_file)
    return {
        "split_digest": split.digest,
        "split_history_len": len(split.history),
        "split_history_digest": stable_hash(split.history),
    }


def _write_report(
    cfg: DictConfig,
    record: dict[str, Any],
    result: EvaluationResult,
    look_dir: Path,
    attempt: dict[str, Any],
    force_reason: str | None,
) -> Path:
    """experiments/<study>/test_looks/<n>/: test_report.{md,json}, per-query table and plots (never overwritten)."""
    family = Family.from_dict(record["family"])
    with atomic_dir(look_dir) as tmp:
        comparison = attach_family_comparison(cfg, result, family, list(record["metrics"]), tmp, "test_report")
        report = {
            "study": attempt["study"],
            "look": attempt["look"],
            "attempt": attempt,
            "evaluation": str(result.output_dir),
            "mlflow_run_id": result.mlflow_run_id,
            "questions": result.info["questions"],
            "scored_questions": result.info["scored_questions"],
            "dev_evidence": record["dev_evidence"]["comparison"],
            **comparison.to_json(),
        }
        write_json(tmp / "test_report.json", report)
        header = (
            f"# Locked test: {attempt['study']}, look {attempt['look']}\n\n"
            f"{result.info['questions']} test questions; finalists of {record['created']}"
        )
        if attempt["forced"]:
            header += f"\n\n**Forced re-run** (look number {attempt['look']} at the test split): {force_reason}"
        write_text(tmp / "test_report.md", header + "\n\n" + comparison.markdown())
    return look_dir / "test_report.md"


def mlflow_looks(cfg: DictConfig, study: str) -> list[str]:
    """Run ids of the MLflow runs tagged as locked-test looks of `study` (deleted runs included)."""
    uri = str(cfg.tracking.uri)
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).exists():
        return []  # no tracking store here: the reports and the ledger are the witnesses
    from mlflow import MlflowClient
    from mlflow.entities import ViewType

    client = MlflowClient(tracking_uri=uri)
    experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL)]
    if not experiments:
        return []
    runs = client.search_runs(
        experiments,
        filter_string=f"tags.stage = 'locked_test' and tags.study = '{study}'",
        run_view_type=ViewType.ALL,
    )
    return [run.info.run_id for run in runs]


def _tag_run(cfg: DictConfig, run_id: str, study: str, attempt: dict[str, Any], files: list[Path]) -> None:
    import mlflow

    from fixgraph.tracking import setup

    setup(cfg)
    with mlflow.start_run(run_id=run_id):
        mlflow.set_tags(
            {
                "stage": "locked_test",
                "study": study,
                "locked_test_look": str(attempt["look"]),
                "forced": str(attempt["forced"]).lower(),
                "force_reason": attempt["force_reason"] or "",
            }
        )
        for path in files:
            mlflow.log_artifact(str(path), artifact_path="study")
