"""Expected-score files: the fixture configuration still scores what it scored; a drift is named."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fixgraph.experiment.expected import check
from tests.conftest import REPO


def test_fixture_configuration_scores_what_it_scored(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(REPO)  # the file's paths are relative to the repository root
    path = REPO / "benchmarks" / "expected" / "fixture.yaml"
    assert check(path) == []

    spec = yaml.safe_load(path.read_text())
    spec["expected"]["hybrid"]["mrr"] += 0.01  # what a silent change in fusion would look like
    spec["expected"]["bm25"]["no_such_metric"] = 1.0
    drifted = tmp_path / "drifted.yaml"
    drifted.write_text(yaml.safe_dump(spec))
    problems = {(m.system, m.metric): m for m in check(drifted)}
    assert set(problems) == {("hybrid", "mrr"), ("bm25", "no_such_metric")}
    assert problems[("hybrid", "mrr")].actual == pytest.approx(spec["expected"]["hybrid"]["mrr"] - 0.01, abs=1e-9)
    assert problems[("bm25", "no_such_metric")].actual is None
