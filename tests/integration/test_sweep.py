"""Sweeps over any config axis on the fixture corpus: conditional spaces, MLflow parent + children with
resolved configs, cached trials equal to live runs, resume, refusals, grid, finalists from a sweep."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from omegaconf import DictConfig, OmegaConf

from fixgraph.config import systems_of, to_dict
from fixgraph.evaluation.protocol_errors import SweepError
from fixgraph.experiment.evaluate import rank_all
from fixgraph.experiment.sweep import run_sweep
from fixgraph.experiment.sweep_spec import split_sweep_overrides
from fixgraph.experiment.trials import load_runner

SPACE = [
    "retriever=choice(bm25, dense, hybrid, hybrid_weighted)",
    "reranker=choice(none, llm)",  # the fake LLM's relevance: a scorer the cache records like any other
]
CONDITIONAL = {
    "retriever.rrf_k": {"values": "tag(log, int(interval(1, 100)))", "when": {"retriever.fusion": "rrf"}},
    "retriever.weights.bm25": {"values": "interval(0.05, 1.0)", "when": {"retriever.fusion": "weighted"}},
}


def _sweep(make: Callable[..., DictConfig], overrides: Sequence[str], **kwargs: Any) -> Any:
    """What `fixgraph sweep <overrides>` does: plain overrides compose the base, expressions the space."""
    plain, params = split_sweep_overrides([*make.base, *overrides])  # type: ignore[attr-defined]
    return run_sweep(make(plain[len(make.base) :]), overrides=plain, sweep_params=params, **kwargs)  # type: ignore[attr-defined]


def test_sweep_over_systems_logs_resolved_configs_and_replays_exactly(
    protocol_config: Callable[..., DictConfig],
) -> None:
    import mlflow

    space = {"retriever": SPACE[0].split("=", 1)[1], "reranker": SPACE[1].split("=", 1)[1], **CONDITIONAL}
    overrides = ["sweep=systems"]
    cfg = protocol_config(overrides)
    cfg.sweep.space = OmegaConf.create(space)  # conf/sweep/systems.yaml's shape, over what the fixture has
    summary = run_sweep(cfg, overrides=[*protocol_config.base, *overrides], study="systems", trials=16)  # type: ignore[attr-defined]
    assert summary.complete == 16 and summary.failed == 0
    assert summary.extra["scoring_paths"]["cached"] > 0  # later trials replay what earlier ones recorded

    mlflow.set_tracking_uri(str(cfg.tracking.uri))
    parent = mlflow.get_run(summary.parent_run_id)
    assert parent.data.tags["stage"] == "sweep" and parent.data.metrics["complete_trials"] == 16
    children = mlflow.search_runs(
        experiment_ids=[parent.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{summary.parent_run_id}'",
        output_format="list",
    )
    assert len(children) == 16
    kinds = {c.data.params["trial.retriever"] for c in children}
    assert len(kinds) >= 3  # the retriever choice really varies
    for child in children:
        params = child.data.params
        # the resolved system config is logged: a reranked system holds its first stage
        prefix = "system.first_stage." if params["trial.reranker"] == "llm" else "system."
        assert params[f"{prefix}name"] == params["trial.retriever"]
        fusion = params.get(f"{prefix}fusion")
        assert ("trial.retriever.rrf_k" in params) == (fusion == "rrf")  # conditional sub-spaces
        assert ("trial.retriever.weights.bm25" in params) == (fusion == "weighted")
        assert child.data.tags["scoring_path"] in ("cached", "live")
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(summary.parent_run_id)}
    assert {"trials.csv", "summary.json", "best_system.json", "plots"} <= artifacts

    # cached trials equal live runs of the same configs (fresh indexes, models run)
    import optuna

    from fixgraph.experiment.sweep import default_storage, open_storage

    study = optuna.load_study(study_name="systems", storage=open_storage(default_storage(cfg)))
    complete = [t for t in study.get_trials() if t.state == optuna.trial.TrialState.COMPLETE]
    runner = load_runner(cfg, cfg_spec(cfg), [*protocol_config.base, *overrides])  # type: ignore[attr-defined]
    assert all(len(t.intermediate_values) == 4 for t in complete)  # running objective per batch (pruning)
    for trial in complete[-3:]:
        trial_cfg = runner.compose(trial.params)
        replayed = runner.score(trial.params, trial_cfg)
        assert replayed.stats.path == "cached"
        assert replayed.system_config == trial.user_attrs["system_config"]
        live_cfg = OmegaConf.create(to_dict(trial_cfg))
        live_cfg.systems = OmegaConf.create({"live": to_dict(systems_of(trial_cfg)[replayed.system])})
        live_cfg.reranker = OmegaConf.create({"name": "none", "kind": "none"})
        live, _ = rank_all(live_cfg, runner.questions, runner.corpus(trial_cfg).chunks)
        assert live["live"] == replayed.rankings
        scored = replayed.per_question[replayed.per_question["scored"].astype(bool)]
        assert float(scored["recall_at_8"].mean()) == pytest.approx(trial.value)


def cfg_spec(cfg: DictConfig) -> Any:
    from fixgraph.experiment.sweep_spec import build_sweep

    return build_sweep(cfg.sweep)


def test_command_line_space_resumes_and_refuses_changes(protocol_config: Callable[..., DictConfig]) -> None:
    space = ["experiment=single", "retriever=hybrid", "retriever.rrf_k=int(interval(1, 100))"]
    first = _sweep(protocol_config, space, study="cli", trials=6)
    assert first.complete == 6
    resumed = _sweep(protocol_config, space, study="cli", trials=9)
    assert resumed.complete == 9 and resumed.parent_run_id == first.parent_run_id
    trials = pd.read_csv(Path(str(protocol_config().paths.artifacts)) / "sweeps" / "cli" / "trials.csv")
    assert (trials["state"] == "COMPLETE").sum() == 9
    assert len(set(trials.loc[trials["state"] == "COMPLETE", "params_retriever.rrf_k"])) == 9  # no duplicates
    with pytest.raises(SweepError, match="recorded for another search space"):
        _sweep(protocol_config, [*space[:2], "retriever.rrf_k=int(interval(1, 50))"], study="cli", trials=10)
    with pytest.raises(SweepError, match="is not a key of any config"):
        _sweep(protocol_config, [*space[:2], "retriever.rrf_kk=int(interval(1, 50))"], study="typo", trials=2)
    with pytest.raises(SweepError, match="dev part of a frozen split only"):
        _sweep(protocol_config, ["split=pool", *space], study="pool", trials=2)


def test_grid_sampler_visits_each_point_once(protocol_config: Callable[..., DictConfig]) -> None:
    space = ["experiment=single", "retriever=choice(bm25, hybrid)", "evaluation.bootstrap.resamples=100"]
    summary = _sweep(protocol_config, ["tracking.enabled=false", *space], study="grid", trials=50, sampler="grid")
    assert summary.complete == 2  # the two-point grid, then the sampler stops by itself


def test_finalists_from_a_sweep_are_what_the_test_scores(protocol_config: Callable[..., DictConfig]) -> None:
    from fixgraph.experiment.locked import StudyPaths, read_finalists, record_finalists
    from fixgraph.experiment.studies import finalist_config, sweep_finalists

    space = ["experiment=single", "retriever=choice(dense, hybrid_weighted, hybrid)", "tracking.enabled=false"]
    _sweep(protocol_config, space, study="pick", trials=3)
    cfg = protocol_config(["tracking.enabled=false"])  # retrieval_baselines: bm25, dense, hybrid
    chosen = sweep_finalists(cfg, "pick", top=2)
    assert len(chosen) == 2 and all("-t" in name for name in chosen)
    record_finalists(cfg, "from-sweep", list(chosen), baseline="bm25", extra_systems=chosen, track=False)
    record = read_finalists(StudyPaths.of(cfg, "from-sweep"))
    assert {k: v for k, v in record["config"]["systems"].items() if k != "bm25"} == chosen
    assert record["config"]["reranker"]["kind"] == "none"
    name = next(iter(chosen))
    answering = finalist_config(cfg, "from-sweep", name)
    assert list(systems_of(answering)) == [name] and to_dict(systems_of(answering)[name]) == chosen[name]


def test_walk_through_sweep_finalists_test_answers_on_one_system(
    protocol_config: Callable[..., DictConfig], capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's loop through the CLI: each step hands on the same resolved system config."""
    import json

    import optuna

    from fixgraph.cli import main
    from fixgraph.experiment.locked import StudyPaths, read_finalists
    from fixgraph.experiment.sweep import default_storage, open_storage

    base = [*protocol_config.base, "tracking.enabled=false"]  # type: ignore[attr-defined]
    space = ["experiment=single", "retriever=choice(dense, hybrid_weighted)", "retriever.depth=range(20, 101, 40)"]
    assert main(["sweep", *base, *space, "--study", "walk", "--trials", "4"]) == 0
    # overrides before and after the flags
    assert main(["finalists", *base[:3], "--study", "loop", "--from-sweep", "walk", "--top", "1", *base[3:]]) == 0
    cfg = protocol_config(["tracking.enabled=false"])
    record = read_finalists(StudyPaths.of(cfg, "loop"))
    (finalist,) = record["finalists"]
    study = optuna.load_study(study_name="walk", storage=open_storage(default_storage(cfg)))
    best = study.best_trial
    assert record["config"]["systems"][finalist] == best.user_attrs["system_config"]
    assert main(["test", *base, "--study", "loop"]) == 0
    assert main(["answers", "--study", "loop", "--finalist", finalist, *base, "llm=fake", "--no-track"]) == 0
    out = capsys.readouterr().out
    answers_dir = next(Path(str(cfg.paths.artifacts)).glob("eval/*/answers_*"))
    systems = {json.loads(line)["system"] for line in (answers_dir / "answers.jsonl").read_text().splitlines()}
    assert finalist in systems and "outputs:" in out
