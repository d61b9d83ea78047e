"""`fixgraph sweep`: Optuna over a search space of any config axis (conf/sweep/*.yaml or sweep
expressions on the command line), scored on the dev split only.

- Optuna 5 directly (Hydra composes each trial; the hydra-optuna-sweeper plugin pins optuna<3);
  TPE by default, grid or random on request; median pruning on request (trials report their running
  objective per question batch). Trials are composed and scored by experiment/trials.py.
- Storage: sqlite under artifacts/sweeps/ by default, or any database URL (postgresql://...) so that
  workers on several machines share one study (`fixgraph sweep --join --study S --storage URL`).
  `--workers N` starts N worker processes here. Stale trials of killed workers fail by heartbeat.
- Resumable: the study name identifies it; running again continues until n_trials trials are
  complete. A study recorded for another search space, objective, split or base config is refused.
- MLflow: one parent run per study (its id kept in the study), one child run per completed trial with
  the trial's overrides and resolved system config; the parent gets the best trial, the trials table and
  Optuna's history and parameter-importance plots.
- Each trial's parameter set is evaluated once: a trial whose parameters an earlier (or running,
  lower-numbered) trial already has is pruned and marked `duplicate_of`, before and after scoring.
  With several workers, a trial that would exceed n_trials (complete + running lower-numbered ones)
  is pruned as `over_budget`, so the study ends with exactly n_trials complete trials.
"""

from __future__ import annotations

import logging
import math
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.config import to_dict
from fixgraph.evaluation.protocol_errors import SweepError
from fixgraph.evaluation.result import headline_metrics
from fixgraph.evaluation.splitting import read_split_file
from fixgraph.experiment.sweep_mlflow import create_parent_run, log_trial, record
from fixgraph.experiment.sweep_spec import Param, SweepSpec, build_sweep
from fixgraph.experiment.trials import check_space, load_runner
from fixgraph.io import stable_hash
from fixgraph.tracking import setup

log = logging.getLogger(__name__)
PARENT_ATTR = "mlflow_parent_run_id"
SPEC_ATTR = "fixgraph_spec_digest"


@dataclass
class SweepSummary:
    study: str
    storage: str
    complete: int
    pruned: int
    failed: int
    best_value: float | None
    best_params: dict[str, Any]
    parent_run_id: str | None
    path: str
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        return (
            f"study {self.study} ({self.storage}): {self.complete} complete, {self.pruned} pruned duplicates, "
            f"{self.failed} failed; best {self.best_value} at {self.best_params}; scored via {self.path}; "
            f"MLflow parent run {self.parent_run_id}; {self.seconds:.1f}s"
        )


def default_storage(cfg: DictConfig) -> str:
    folder = Path(str(cfg.paths.artifacts)) / "sweeps"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(folder / 'optuna.db').resolve()}"


def driver_url(url: str) -> str:
    """SQLAlchemy 2.1 maps postgresql:// to psycopg 3; we ship psycopg2-binary, so name it explicitly."""
    return "postgresql+psycopg2://" + url[len("postgresql://") :] if url.startswith("postgresql://") else url


def open_storage(url: str) -> Any:
    import warnings

    import optuna

    url = driver_url(url)

    # heartbeats let a restarted sweep fail the trials a killed worker left RUNNING
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(url, heartbeat_interval=30, grace_period=120)


def check_dev_split(cfg: DictConfig) -> None:
    split = cfg.split
    if str(split.get("kind")) == "union":
        return  # a union of frozen dev parts; UnionSplit refuses any other part
    if str(split.get("kind")) != "frozen" or str(split.get("part")) != "dev":
        raise SweepError(
            f"sweeps tune on the dev part of a frozen split only (split=dev); got split={split.get('name')} "
            f"(kind {split.get('kind')}, part {split.get('part')})"
        )


def spec_digest(cfg: DictConfig, spec: SweepSpec, base_overrides: Sequence[str]) -> str:
    """What a study's trials are comparable under: space, objective, base overrides, the composed base
    config (minus where things are written) and the split."""
    base = {k: v for k, v in to_dict(cfg).items() if k not in ("paths", "tracking", "sweep")}
    return stable_hash(
        {
            "spec": spec.describe(),
            "overrides": list(base_overrides),
            "base": base,
            "split": split_digest(cfg.split),
        }
    )


def split_digest(split: DictConfig) -> str:
    """The frozen split file's digest; a union's parts' digests, by part."""
    if str(split.get("kind")) == "union":
        return stable_hash({key: split_digest(part) for key, part in split.parts.items()})
    return read_split_file(Path(str(split.file))).digest


def prepare_study(
    cfg: DictConfig, spec: SweepSpec, base_overrides: Sequence[str], study_name: str, storage_url: str, track: bool
) -> Any:
    """Create (or reopen, if recorded for the same spec) the study and its MLflow parent run."""
    import optuna

    digest = spec_digest(cfg, spec, base_overrides)
    study = optuna.create_study(
        study_name=study_name,
        storage=open_storage(storage_url),
        direction="maximize" if spec.direction == "maximize" else "minimize",
        load_if_exists=True,
    )
    recorded = study.user_attrs.get(SPEC_ATTR)
    if recorded is None:
        study.set_user_attr(SPEC_ATTR, digest)
        study.set_user_attr("spec", spec.describe())
        study.set_user_attr("base_overrides", list(base_overrides))
    elif recorded != digest:
        raise SweepError(
            f"study {study_name!r} in {storage_url.split('@')[-1]} was recorded for another search space, "
            "objective, split or base config; resume it with that config or choose another --study"
        )
    if track and PARENT_ATTR not in study.user_attrs:
        study.set_user_attr(PARENT_ATTR, create_parent_run(cfg, spec, study_name, storage_url, digest))
    return study


def _claims(study: Any) -> list[Any]:
    """Trials that hold a parameter set or a place in the budget: complete and running ones."""
    from optuna.trial import TrialState

    return list(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING)))


def _duplicate_of(claims: list[Any], trial: Any, params: dict[str, Any]) -> int | None:
    """An earlier claim on the same parameters: a complete trial, or a running one with a lower number."""
    from optuna.trial import TrialState

    for other in claims:
        if other.number == trial.number or other.params != params:
            continue
        if other.state == TrialState.COMPLETE or other.number < trial.number:
            return int(other.number)
    return None


def _over_budget(claims: list[Any], trial: Any, n_trials: int) -> bool:
    """Complete trials plus running lower-numbered ones already fill the budget (parallel workers)."""
    from optuna.trial import TrialState

    taken = sum(t.state == TrialState.COMPLETE or t.number < trial.number for t in claims if t.number != trial.number)
    return taken >= n_trials


def work(
    cfg: DictConfig,
    spec: SweepSpec,
    overrides: Sequence[str],
    study_name: str,
    storage_url: str,
    n_trials: int,
    sampler: str | None,
    worker: int,
    track: bool,
) -> None:
    """One worker: optimise until the study holds n_trials complete trials (or the grid is exhausted)."""
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    runner = load_runner(cfg, spec, overrides)
    study = optuna.load_study(
        study_name=study_name,
        storage=open_storage(storage_url),
        sampler=spec.make_sampler(sampler, worker),
        pruner=spec.make_pruner(),
    )
    parent = study.user_attrs.get(PARENT_ATTR) if track else None
    experiment_id = setup(cfg) if parent else None
    metrics_wanted = list(dict.fromkeys([spec.objective, *headline_metrics(cfg)]))
    cap = n_trials * 3 + 20  # duplicates are pruned; stop before a small space loops forever

    def objective(trial: Any) -> float:
        params, trial_cfg = runner.suggest(trial)
        claims = _claims(study)
        if _over_budget(claims, trial, n_trials):
            trial.set_user_attr("over_budget", True)
            study.stop()
            raise optuna.TrialPruned("the study already has its trials")
        duplicate = _duplicate_of(claims, trial, params)
        if duplicate is None:

            def report(value: float, step: int) -> None:
                trial.report(value, step)
                if trial.should_prune():
                    trial.set_user_attr("pruned_at_batch", step)
                    raise optuna.TrialPruned(f"running {spec.objective} {value:.3f} after batch {step}")

            result = runner.score(params, trial_cfg, report, spec.objective)
            scored = result.per_question[result.per_question["scored"].astype(bool)]
            if spec.objective not in scored.columns:
                raise SweepError(f"objective {spec.objective!r} is not a metric; have {', '.join(scored.columns)}")
            means = {m: float(scored[m].mean()) for m in metrics_wanted if m in scored.columns}
            duplicate = _duplicate_of(_claims(study), trial, params)  # a claim that arrived while scoring
        if duplicate is not None:
            trial.set_user_attr("duplicate_of", duplicate)
            raise optuna.TrialPruned(f"parameters of trial {duplicate}")
        trial.set_user_attr("scoring_path", result.stats.path)
        trial.set_user_attr("cache_hits", result.stats.hits)
        trial.set_user_attr("cache_misses", result.stats.misses)
        trial.set_user_attr("worker", worker)
        trial.set_user_attr("system", result.system)
        trial.set_user_attr("system_config", result.system_config)
        trial.set_user_attr("chunker", to_dict(trial_cfg.chunker))
        trial.set_user_attr("overrides", result.overrides)
        if parent and experiment_id is not None:
            run_id = log_trial(experiment_id, parent, study_name, trial, means, result)
            trial.set_user_attr("mlflow_run_id", run_id)
        value = means[spec.objective]
        return value if math.isfinite(value) else 0.0

    def stop_when_done(study: Any, _: Any) -> None:
        trials = study.get_trials(deepcopy=False)
        if sum(t.state == TrialState.COMPLETE for t in trials) >= n_trials or len(trials) >= cap:
            study.stop()

    done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(done) < n_trials:
        study.optimize(objective, n_trials=cap, callbacks=[stop_when_done], gc_after_trial=False)


def resolve_spec(cfg: DictConfig, sweep_params: Sequence[Param], overrides: Sequence[str] = ()) -> SweepSpec:
    if "sweep" not in cfg or cfg.sweep is None:
        raise SweepError("no search space: choose one with sweep=<option> (conf/sweep/) or give sweep expressions")
    named = any(o.lstrip("+").startswith("sweep.system=") for o in overrides)
    spec = build_sweep(cfg.sweep).with_params(sweep_params, keep_system=named)
    if not spec.params:
        raise SweepError(f"sweep {spec.name}: empty search space")
    return spec


def run_sweep(
    cfg: DictConfig,
    overrides: Sequence[str] = (),
    sweep_params: Sequence[Param] = (),
    study: str | None = None,
    trials: int | None = None,
    sampler: str | None = None,
    storage: str | None = None,
    workers: int = 1,
    join: bool = False,
) -> SweepSummary:
    """`cfg` is the composition of the plain `overrides`; `sweep_params` (from sweep expressions on the
    command line) replace the space of `cfg.sweep`. Every trial composes `spec.base + overrides + its own`."""
    import optuna
    from optuna.trial import TrialState

    check_dev_split(cfg)
    spec = resolve_spec(cfg, sweep_params, overrides)
    base_overrides = [*spec.base, *overrides]
    name = study or spec.name
    url = storage or spec.storage or default_storage(cfg)
    n_trials = trials or spec.n_trials
    track = bool(cfg.tracking.enabled)
    started = time.perf_counter()
    if not join:
        runner = load_runner(cfg, spec, overrides)
        check_space(runner, spec.params)
        prepare_study(cfg, spec, base_overrides, name, url, track)
    elif spec_digest(cfg, spec, base_overrides) != optuna.load_study(
        study_name=name, storage=open_storage(url)
    ).user_attrs.get(SPEC_ATTR):
        raise SweepError(f"study {name!r} does not exist or was recorded for another config; cannot join it")
    if workers > 1 and not join:
        _spawn_workers(cfg, overrides, sweep_params, name, url, n_trials, sampler, workers)
    else:
        index = 0 if not join else _worker_index()
        work(cfg, spec, overrides, name, url, n_trials, sampler, index, track)
    final = optuna.load_study(study_name=name, storage=open_storage(url))
    trials_all = final.get_trials(deepcopy=False)
    complete = [t for t in trials_all if t.state == TrialState.COMPLETE]
    best = final.best_trial if complete else None
    summary = SweepSummary(
        study=name,
        storage=url.split("@")[-1],
        complete=len(complete),
        pruned=sum(t.state == TrialState.PRUNED and "duplicate_of" in t.user_attrs for t in trials_all),
        failed=sum(t.state == TrialState.FAIL for t in trials_all),
        best_value=None if best is None or best.value is None else float(best.value),
        best_params={} if best is None else dict(best.params),
        parent_run_id=final.user_attrs.get(PARENT_ATTR),
        path=",".join(sorted({str(t.user_attrs.get("scoring_path", "?")) for t in complete})),
        seconds=time.perf_counter() - started,
        extra={
            "pruned_early": sum("pruned_at_batch" in t.user_attrs for t in trials_all),
            "scoring_paths": {
                p: sum(t.user_attrs.get("scoring_path") == p for t in complete) for p in ("cached", "live")
            },
        },
    )
    if not join:
        record(cfg, final, summary)
    return summary


def _worker_index() -> int:
    """Distinct sampler seeds per worker: spawned ones are numbered, a joiner elsewhere uses its pid."""
    import os

    return int(os.environ.get("FIXGRAPH_SWEEP_WORKER", str(os.getpid())))


def _spawn_workers(
    cfg: DictConfig,
    overrides: Sequence[str],
    sweep_params: Sequence[Param],
    study: str,
    url: str,
    n_trials: int,
    sampler: str | None,
    workers: int,
) -> None:
    """N local worker processes joining the study; they share it through the storage, as remote ones would.
    Each recomposes the same config from the same overrides (conf/ is the source of truth)."""
    import os

    del cfg  # workers compose their own
    expressions = [f"{p.key}={p.expression}" for p in sweep_params]
    command = [sys.executable, "-m", "fixgraph.cli", "sweep", "--join", "--study", study, "--storage", url]
    command += ["--trials", str(n_trials), *(["--sampler", sampler] if sampler else []), *overrides, *expressions]
    procs = [subprocess.Popen(command, env={**os.environ, "FIXGRAPH_SWEEP_WORKER": str(i + 1)}) for i in range(workers)]
    codes = [p.wait() for p in procs]
    if any(codes):
        raise SweepError(f"sweep workers exited with {codes}")
