"""Search spaces: Hydra sweep syntax parsed into Optuna parameters, conditions, samplers, bad spaces named."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from omegaconf import OmegaConf

from fixgraph.config import compose
from fixgraph.evaluation.protocol_errors import SweepError
from fixgraph.experiment.sweep import resolve_spec
from fixgraph.experiment.sweep_spec import build_sweep, parse_param, split_sweep_overrides
from fixgraph.experiment.trials import TrialRunner, check_space

BASE = {"name": "s", "kind": "optuna", "system": "hybrid", "n_trials": 5}


@pytest.mark.parametrize(
    ("expression", "kind", "expected"),
    [
        (
            "choice(dense, dense_mpnet, hybrid_weighted)",
            "categorical",
            {"choices": ("dense", "dense_mpnet", "hybrid_weighted")},
        ),
        ("int(interval(1, 200))", "int", {"low": 1, "high": 200, "log": False}),
        ("tag(log, int(interval(1, 200)))", "int", {"low": 1, "high": 200, "log": True}),
        ("interval(0.05, 1.0)", "float", {"low": 0.05, "high": 1.0}),
        ("range(10, 101, 10)", "int", {"low": 10, "high": 100, "step": 10}),
        ("range(0.3, 2.01, 0.1)", "float", {"low": 0.3, "high": 2.0, "step": 0.1}),
    ],
)
def test_hydra_sweep_expressions(expression: str, kind: str, expected: dict[str, object]) -> None:
    param = parse_param("k", expression)
    assert param.kind == kind
    for field, value in expected.items():
        assert (
            getattr(param, field) == pytest.approx(value)
            if isinstance(value, float)
            else getattr(param, field) == value
        )


def test_grid_values_come_from_grid_choices_or_int_range() -> None:
    assert parse_param("a", "range(10, 41, 10)").grid_values() == [10, 20, 30, 40]
    assert parse_param("b", "choice(x, y)").grid_values() == ["x", "y"]
    assert parse_param("c", {"values": "interval(0, 1)", "grid": [0.2, 0.4]}).grid_values() == [0.2, 0.4]
    with pytest.raises(SweepError, match="'d': the grid sampler needs `grid"):
        parse_param("d", "interval(0, 1)").grid_values()


@pytest.mark.parametrize(
    ("key", "node", "message"),
    [
        ("p", "interval(5, 1)", "needs low <= high"),
        ("p", "5", "is not a sweep"),
        ("p", "choice(", "cannot parse"),
        ("p", {"values": "choice(a)", "where": {}}, "takes values, when and grid"),
        ("split", "choice(dev, test)", "split is fixed"),
        ("evaluation.depth", "range(10, 50, 10)", "evaluation is fixed"),
    ],
)
def test_bad_parameters_are_named(key: str, node: object, message: str) -> None:
    with pytest.raises(SweepError, match=message):
        parse_param(key, node)


def test_conditions_follow_the_composed_config() -> None:
    rrf_k = parse_param("retriever.rrf_k", {"values": "int(interval(1, 9))", "when": {"retriever.fusion": "rrf"}})
    assert rrf_k.active(OmegaConf.create({"retriever": {"fusion": "rrf"}}))
    assert not rrf_k.active(OmegaConf.create({"retriever": {"fusion": "weighted"}}))
    assert not rrf_k.active(OmegaConf.create({"retriever": {"kind": "dense"}}))  # no fusion at all
    either = parse_param("x", {"values": "choice(1, 2)", "when": {"reranker.kind": ["bi_encoder", "blend"]}})
    assert either.active(OmegaConf.create({"reranker": {"kind": "blend"}}))


def test_command_line_splits_plain_overrides_from_the_space() -> None:
    plain, params = split_sweep_overrides(
        ["corpus=evolution_help", "retriever=choice(dense,hybrid_weighted)", "systems.x.rrf_k=int(interval(1,200))"]
    )
    assert plain == ["corpus=evolution_help"]
    assert [(p.key, p.kind) for p in params] == [("retriever", "categorical"), ("systems.x.rrf_k", "int")]
    assert params[0].expression == "choice(dense,hybrid_weighted)"  # handed to spawned workers as written


def test_samplers_and_suggestions() -> None:
    spec = build_sweep({**BASE, "space": {"rrf_k": "range(1, 4)"}, "sampler": "grid"})
    assert isinstance(spec.make_sampler(), optuna.samplers.GridSampler) and spec.grid_size() == 3
    assert isinstance(spec.make_sampler("tpe"), optuna.samplers.TPESampler)
    study = optuna.create_study(sampler=spec.make_sampler())
    seen = []
    study.optimize(lambda t: seen.append(spec.params[0].suggest(t)) or 0.0, n_trials=3)
    assert sorted(seen) == [1, 2, 3]  # the grid, each point once
    assert isinstance(spec.make_pruner(), optuna.pruners.NopPruner)
    median = build_sweep({**BASE, "space": {"x": "range(1, 3)"}, "pruner": "median"})
    assert isinstance(median.make_pruner(), optuna.pruners.MedianPruner)
    with pytest.raises(SweepError, match="unknown sampler"):
        build_sweep({**BASE, "space": {"x": "range(1, 3)"}, "sampler": "cmaes"})
    with pytest.raises(SweepError, match="unknown pruner"):
        build_sweep({**BASE, "space": {"x": "range(1, 3)"}, "pruner": "hyperband"})


def test_duplicate_and_budget_rules_by_hand() -> None:
    from types import SimpleNamespace

    from optuna.trial import TrialState

    from fixgraph.experiment.sweep import _duplicate_of, _over_budget

    def t(number: int, state: TrialState, **params: int) -> SimpleNamespace:
        return SimpleNamespace(number=number, state=state, params=params)

    claims = [t(0, TrialState.COMPLETE, k=1), t(3, TrialState.RUNNING, k=2), t(5, TrialState.RUNNING, k=3)]
    me = t(4, TrialState.RUNNING, k=2)
    assert _duplicate_of(claims, me, {"k": 1}) == 0  # a complete trial has it
    assert _duplicate_of(claims, me, {"k": 2}) == 3  # a lower-numbered running trial claimed it first
    assert _duplicate_of(claims, me, {"k": 3}) is None  # trial 5 came later: it is the one to yield
    assert _duplicate_of(claims, me, {"k": 9}) is None
    # budget: complete 0 + running lower 3 = 2 taken before trial 4 (trial 5 does not count)
    assert not _over_budget([*claims, me], me, 3)
    assert _over_budget([*claims, me], me, 2)


def test_trial_records_in_mlflow_hide_secrets() -> None:
    from fixgraph.experiment.sweep_mlflow import redact_overrides

    assert redact_overrides(["llm.api_key=sk-live", "retriever=dense", "+llm.token=x"]) == [
        "llm.api_key=<redacted>",
        "retriever=dense",
        "+llm.token=<redacted>",
    ]


SHIPPED_SWEEPS = sorted(p.stem for p in (Path(__file__).parents[2] / "conf" / "sweep").glob("*.yaml"))


@pytest.mark.parametrize("name", SHIPPED_SWEEPS)
def test_every_shipped_sweep_names_keys_of_the_configs_it_composes(name: str) -> None:
    """A shipped search space stays in step with the configs: a renamed key fails here, not at trial 0."""
    cfg = compose([f"sweep={name}"])
    spec = resolve_spec(cfg, [])
    check_space(TrialRunner(cfg, spec, list(spec.base), []), spec.params)
    typo = parse_param("retriever.no_such_key", "interval(0.0, 1.0)")
    with pytest.raises(SweepError, match=r"retriever\.no_such_key"):
        check_space(TrialRunner(cfg, spec, list(spec.base), []), [*spec.params, typo])


def test_a_sweep_may_tune_on_a_union_of_dev_parts_and_its_studies_tell_the_unions_apart() -> None:
    from fixgraph.experiment.sweep import check_dev_split, split_digest

    union = compose(["split=gnome_dev_all"]).split
    check_dev_split(compose(["split=gnome_dev_all"]))  # refused before: "frozen split only"
    with pytest.raises(SweepError, match="dev part of a frozen split"):
        check_dev_split(compose(["split=pool"]))
    two = OmegaConf.create(
        {**OmegaConf.to_container(union), "parts": {k: union.parts[k] for k in ("dev", "bridge_dev")}}
    )
    digests = {split_digest(union), split_digest(two), *(split_digest(p) for p in union.parts.values())}
    assert len(digests) == 5  # a study swept on one question set is not resumed on another
