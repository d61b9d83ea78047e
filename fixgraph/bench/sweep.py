"""Sweep speed: Optuna trials over the configured sweep (default `sweep=systems`) on the dev split, from
the candidate cache.

Everything a real `fixgraph sweep` does per trial is timed (TPE sampling, sqlite study storage, Hydra
composition of the trial's overrides, replaying the system from the candidate cache, scoring with
ir-measures, one MLflow child run per trial), with the Optuna and MLflow stores in a temporary folder
so the user's own are untouched. Recording what the cache still lacks (running each distinct leaf
retriever and scorer once) is a first study, reported apart; the timed study then runs `trials` trials.
The peer, measured in the same run: a few of the timed study's trial configs evaluated live
(`System.search` through freshly opened indexes, as `fixgraph run` does), whose rankings must equal
the replayed ones. Needs the corpus (`fixgraph fetch`), mpnet (`make models-stock`) for the default space.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fixgraph.bench import options
from fixgraph.config import systems_of, to_dict
from fixgraph.experiment.evaluate import rank_all
from fixgraph.experiment.sweep import open_storage, run_sweep
from fixgraph.experiment.sweep_spec import build_sweep
from fixgraph.experiment.trials import load_runner
from fixgraph.pipeline.candidates import replay_rankings
from fixgraph.pipeline.stages import load_chunks

PEER_TRIALS = 3


def run(cfg: DictConfig, overrides: Sequence[str] = ()) -> dict[str, Any]:
    bench = options(cfg)
    trials = int(bench.get("trials", 100))
    cfg = OmegaConf.create(to_dict(cfg))
    spec = build_sweep(cfg.sweep)
    with tempfile.TemporaryDirectory(prefix="fixgraph-bench-sweep-") as tmp:
        cfg.tracking.uri = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        cfg.paths.mlruns = str(Path(tmp) / "mlruns")
        storage = f"sqlite:///{Path(tmp) / 'optuna.db'}"
        stamp = int(time.time())
        # first study: fills the cache with every leaf and scorer its trials reach (random sampler)
        common = {"overrides": list(overrides), "trials": trials, "storage": storage}
        warm = run_sweep(cfg, study=f"bench-warm-{stamp}", sampler="random", **common)  # type: ignore[arg-type]
        timed = run_sweep(cfg, study=f"bench-{stamp}", **common)  # type: ignore[arg-type]
        peer = live_peer(cfg, spec, list(overrides), f"bench-{stamp}", storage)
    return {
        "what": f"{trials} TPE trials of sweep {spec.name} over {spec.keys}, dev split, sqlite Optuna + MLflow",
        "trials_complete": timed.complete,
        "trials_pruned_duplicates": timed.pruned,
        "sweep_seconds": round(timed.seconds, 2),
        "sweep_seconds_includes": "study setup, loading questions/chunks/gold, composing, replaying, MLflow",
        "trials_per_second": round(timed.complete / timed.seconds, 2),
        "under_120_s": timed.seconds < 120,
        "scoring_paths": timed.extra["scoring_paths"],
        "best_value": timed.best_value,
        "best_params": timed.best_params,
        "recording_study": {
            "what": f"{trials} random trials first, recording each distinct leaf and scorer once",
            "seconds": round(warm.seconds, 2),
            "scoring_paths": warm.extra["scoring_paths"],
        },
        "peer": peer,
    }


def live_peer(cfg: DictConfig, spec: Any, base: list[str], study_name: str, storage: str) -> dict[str, Any]:
    """A few trial configs of the timed study, ranked live (`rank_all`) and replayed: seconds and equality."""
    import optuna
    from optuna.trial import TrialState

    study = optuna.load_study(study_name=study_name, storage=open_storage(storage))
    complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    sample = [complete[i] for i in sorted({0, len(complete) // 2, len(complete) - 1})][:PEER_TRIALS]
    runner = load_runner(cfg, spec, base)
    chunks = load_chunks(cfg)
    live_s, replay_s = [], []
    equal: list[bool] = []
    gaps: list[float] = [0.0]
    for trial in sample:
        trial_cfg = runner.compose(trial.params)
        name = next(iter(systems_of(trial_cfg))) if spec.system is None else spec.system
        trial_cfg.systems = OmegaConf.create({name: to_dict(systems_of(trial_cfg)[name])})
        trial_cfg.reranker = OmegaConf.create({"name": "none", "kind": "none"})
        started = time.perf_counter()
        live, _ = rank_all(trial_cfg, runner.questions, chunks)
        live_s.append(time.perf_counter() - started)
        started = time.perf_counter()
        replayer = runner.corpus(trial_cfg).replayer
        replayed, _ = replay_rankings(replayer, trial_cfg.systems[name], runner.questions, int(cfg.evaluation.depth))
        replay_s.append(time.perf_counter() - started)
        for qid, hits in replayed.items():
            equal.append([h.chunk_id for h in hits] == [h.chunk_id for h in live[name][qid]])
            gaps.extend(abs(a.score - b.score) for a, b in zip(hits, live[name][qid], strict=False))
    return {
        "what": f"{len(sample)} of the timed trials' systems ranked live (indexes opened, models run), median",
        "trials": [t.number for t in sample],
        "live_seconds_median": round(statistics.median(live_s), 3),
        "replay_seconds_median": round(statistics.median(replay_s), 3),
        "live_over_replay": round(statistics.median(live_s) / max(statistics.median(replay_s), 1e-9), 1),
        "rankings_equal": all(equal),  # the same chunks in the same order, every question
        # scores recorded by an earlier batch can differ in the last float digits (padding in batched encoding)
        "max_score_difference": float(max(gaps)),
    }
