"""Sweeps on the fixture corpus: fast path == full path, MLflow parent + children, resume, refusals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import DictConfig, open_dict

from fixgraph.evaluation.protocol_errors import SweepError
from fixgraph.experiment.fastpath import FusionFastPath, TrialScorer
from fixgraph.experiment.sweep import load_context, run_sweep
from fixgraph.experiment.sweep_spec import build_sweep

METRICS = ["recall_at_8", "mrr", "ndcg_at_10", "support_complete_at_8", "answer_page_hit_at_8"]


@pytest.mark.parametrize("params", [{"rrf_k": 1, "depth": 10}, {"rrf_k": 60, "depth": 100}, {"rrf_k": 7}])
def test_fusion_fast_path_scores_exactly_like_the_full_path(
    protocol_config: Callable[..., DictConfig], tmp_path: Path, params: dict[str, int]
) -> None:
    cfg = protocol_config(["tracking.enabled=false"])
    spec = build_sweep(cfg.sweep)
    context = load_context(cfg, spec, tmp_path / "cache")
    fast = FusionFastPath()
    assert fast.supports(context, list(params))
    fast.prepare(context, spec.params)
    via_cache = TrialScorer(context, fast).score(params)
    in_full = TrialScorer(context, None).score(params)  # builds and searches a real HybridRetriever
    pd.testing.assert_frame_equal(via_cache[["qid", *METRICS]], in_full[["qid", *METRICS]])
    # the cache is keyed: a second prepare reads it instead of searching again
    again = FusionFastPath()
    again.prepare(context, spec.params)
    assert again.rankings(params) == fast.rankings(params)


def test_fast_path_declines_what_it_cannot_reproduce(
    protocol_config: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = protocol_config(["tracking.enabled=false"])
    context = load_context(cfg, build_sweep(cfg.sweep), tmp_path / "cache")
    assert not FusionFastPath().supports(context, ["rrf_k", "channels.bm25.k1"])  # needs a new BM25 index
    bm25 = load_context(cfg, build_sweep(protocol_config(["sweep=bm25_params"]).sweep), tmp_path / "c2")
    assert not FusionFastPath().supports(bm25, ["k1"])


def test_sweep_logs_parent_and_children_and_resumes(protocol_config: Callable[..., DictConfig]) -> None:
    import mlflow

    cfg = protocol_config()
    first = run_sweep(cfg, study="fusion", trials=8)
    assert first.complete == 8 and first.path == "rrf_fusion"
    resumed = run_sweep(cfg, study="fusion", trials=12)
    assert resumed.complete == 12 and resumed.parent_run_id == first.parent_run_id
    mlflow.set_tracking_uri(str(cfg.tracking.uri))
    parent = mlflow.get_run(first.parent_run_id)
    assert parent.data.tags["stage"] == "sweep" and parent.data.metrics["complete_trials"] == 12
    children = mlflow.search_runs(
        experiment_ids=[parent.info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{first.parent_run_id}'",
        output_format="list",
    )
    assert len(children) == 12
    assert len({(c.data.params["rrf_k"], c.data.params["depth"]) for c in children}) == 12  # no duplicates
    assert all("recall_at_8" in c.data.metrics for c in children)
    best = max(c.data.metrics["recall_at_8"] for c in children)
    assert resumed.best_value == pytest.approx(best)
    trials = pd.read_csv(Path(str(cfg.paths.artifacts)) / "sweeps" / "fusion" / "trials.csv")
    assert (trials["state"] == "COMPLETE").sum() == 12


def test_sweep_refuses_test_questions_and_a_changed_space(protocol_config: Callable[..., DictConfig]) -> None:
    with pytest.raises(SweepError, match="dev part of a frozen split only"):
        run_sweep(protocol_config(["split=pool", "tracking.enabled=false"]), trials=2)
    cfg = protocol_config(["tracking.enabled=false"])
    run_sweep(cfg, study="s", trials=2)
    changed = protocol_config(["tracking.enabled=false", "sweep.space.rrf_k.high=50"])
    with pytest.raises(SweepError, match="recorded for another search space"):
        run_sweep(changed, study="s", trials=3)
    typo = protocol_config(["tracking.enabled=false"])
    with open_dict(typo):
        typo.sweep.space["channels.bm25.k_1"] = {"type": "float", "low": 0.5, "high": 1.5}
    with pytest.raises(SweepError, match=r"systems.hybrid has no channels.bm25.k_1"):
        run_sweep(typo, study="typo")


def test_grid_sampler_visits_each_point_once(protocol_config: Callable[..., DictConfig]) -> None:
    cfg = protocol_config(
        ["tracking.enabled=false", "+sweep.space.depth.grid=[20,100]", "sweep.space.rrf_k.grid=[1,60]"]
    )
    summary = run_sweep(cfg, study="grid", trials=50, sampler="grid")
    assert summary.complete == 4  # the 2 x 2 grid, then the sampler stops by itself
