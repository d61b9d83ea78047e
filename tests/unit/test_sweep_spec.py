"""Search-space parsing: what each sampler is given, and bad spaces named clearly."""

from __future__ import annotations

import optuna
import pytest

from fixgraph.evaluation.protocol_errors import SweepError
from fixgraph.experiment.sweep_spec import build_sweep, parse_param

BASE = {"name": "s", "kind": "optuna", "system": "hybrid", "n_trials": 5}


def test_grid_values_come_from_grid_choices_or_int_range() -> None:
    assert parse_param("a", {"type": "int", "low": 10, "high": 40, "step": 10}).grid_values() == [10, 20, 30, 40]
    assert parse_param("b", {"type": "categorical", "choices": ["x", "y"]}).grid_values() == ["x", "y"]
    assert parse_param("c", {"type": "float", "low": 0, "high": 1, "grid": [0.2, 0.4]}).grid_values() == [0.2, 0.4]
    with pytest.raises(SweepError, match="'d': the grid sampler needs `grid"):
        parse_param("d", {"type": "float", "low": 0, "high": 1}).grid_values()


@pytest.mark.parametrize(
    ("node", "message"),
    [
        ({"type": "string"}, "type must be int, float or categorical"),
        ({"type": "int", "low": 5, "high": 1}, "needs low <= high"),
        ({"type": "int", "low": 1, "high": 9, "log": True, "step": 2}, "cannot be combined"),
        ({"type": "categorical"}, "needs `choices`"),
    ],
)
def test_bad_parameters_are_named(node: dict[str, object], message: str) -> None:
    with pytest.raises(SweepError, match=message):
        parse_param("p", node)


def test_samplers_and_suggestions() -> None:
    spec = build_sweep({**BASE, "space": {"rrf_k": {"type": "int", "low": 1, "high": 3}}, "sampler": "grid"})
    assert isinstance(spec.make_sampler(), optuna.samplers.GridSampler) and spec.grid_size() == 3
    assert isinstance(spec.make_sampler("tpe"), optuna.samplers.TPESampler)
    study = optuna.create_study(sampler=spec.make_sampler())
    seen = []
    study.optimize(lambda t: seen.append(spec.params[0].suggest(t)) or 0.0, n_trials=3)
    assert sorted(seen) == [1, 2, 3]  # the grid, each point once
    with pytest.raises(SweepError, match="unknown sampler"):
        build_sweep({**BASE, "space": {"x": {"type": "int", "low": 1, "high": 2}}, "sampler": "cmaes"})
    with pytest.raises(SweepError, match="empty search space"):
        build_sweep({**BASE, "space": {}})


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
