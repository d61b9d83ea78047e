"""Shared fixtures: offline environment, a small hand-written Mallard corpus, isolated configs."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from omegaconf import DictConfig

from fixgraph.cli import OFFLINE_ENV

for _key, _value in OFFLINE_ENV.items():
    os.environ.setdefault(_key, _value)

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
CONF = REPO / "conf"

# The slow suite runs a file per worker (`--dist loadfile --no-loadscope-reorder`): xdist hands files out in
# collection order, so the files that take minutes go first and the short ones fill in after them. In
# xdist's default order (most tests first) a one-test file of 3-4 minutes came last and kept
# one worker busy while the other idled.
LONG_FIRST = (  # seconds on 2 cores, 2026-12-07: alone, or in the slow suite (about 1.3x alone) where said
    "integration/test_gnome_help.py",  # ~170 s alone
    "integration/test_training_stages.py",  # ~180 s in the suite (QLoRA on the real model)
    "integration/test_dvc_small.py",  # ~110 s alone
    "integration/test_dashboard_browser.py",  # ~115 s in the suite
    "integration/test_retrieval_models.py",  # ~105 s in the suite
    "integration/test_answers_real_model.py",  # ~100 s in the suite
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        tests = REPO / "tests"
        path = item.path.relative_to(tests).as_posix() if item.path.is_relative_to(tests) else ""
        return LONG_FIRST.index(path) if path in LONG_FIRST else len(LONG_FIRST)

    items.sort(key=rank)  # stable: within a rank, collection order


@pytest.fixture(autouse=True)
def _repo_config_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXGRAPH_CONFIG_DIR", str(CONF))


@pytest.fixture
def mallard_dir(tmp_path: Path) -> Path:
    """A copy of the fixture pages (one of them deliberately malformed)."""
    target = tmp_path / "pages"
    shutil.copytree(FIXTURES / "mallard", target)
    return target


@pytest.fixture
def questions_file() -> Path:
    return FIXTURES / "questions.jsonl"


@pytest.fixture(scope="session")
def mlflow_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty MLflow sqlite store, made once per test process: a new store runs MLflow's schema
    migrations (~3 s here), a copy of this one opens in ~0.1 s. The fixtures below put a copy where their
    tracking.uri points; tests through the CLI and `dvc repro` still start from no store at all."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    folder = tmp_path_factory.mktemp("mlflow-store")
    SqlAlchemyStore(f"sqlite:///{folder / 'mlflow.db'}", (folder / "mlruns").as_uri())
    return folder / "mlflow.db"


@pytest.fixture
def fixture_config(
    tmp_path: Path, mallard_dir: Path, questions_file: Path, mlflow_store: Path
) -> Callable[..., DictConfig]:
    """Compose the real config tree, pointed at the fixture corpus and at tmp_path for every output."""
    from fixgraph.config import compose

    shutil.copy(mlflow_store, tmp_path / "mlflow.db")

    def make(overrides: Sequence[str] = ()) -> DictConfig:
        return compose(
            [
                "corpus=mallard_folder",
                f"corpus.snapshot_dir={mallard_dir}",
                "embedder=hashing",
                "split=pool",  # the fixture questions, whole (tests of frozen splits freeze their own)
                f"split.questions={questions_file}",
                f"paths.artifacts={tmp_path / 'artifacts'}",
                f"paths.mlruns={tmp_path / 'mlruns'}",
                f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
                "evaluation.bootstrap.resamples=200",
                "evaluation.min_gold_coverage=0.9",
                *overrides,
            ]
        )

    return make


def option_names(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.fixture
def protocol_config(tmp_path: Path, mallard_dir: Path, mlflow_store: Path) -> Callable[..., DictConfig]:
    """Like fixture_config, but on the frozen dev part of a 16-question pool over the fixture corpus."""
    from fixgraph.config import compose
    from fixgraph.evaluation.splitting import freeze

    shutil.copy(mlflow_store, tmp_path / "mlflow.db")

    pool = tmp_path / "pool.jsonl"
    shutil.copy(FIXTURES / "protocol_questions.jsonl", pool)
    split_file = tmp_path / "split.json"
    freeze(pool, split_file, 0.3, "test-salt")

    base = [
        "corpus=mallard_folder",
        f"corpus.snapshot_dir={mallard_dir}",
        "embedder=hashing",
        f"splitting.pool={pool}",
        f"splitting.file={split_file}",
        "splitting.salt=test-salt",
        f"paths.artifacts={tmp_path / 'artifacts'}",
        f"paths.mlruns={tmp_path / 'mlruns'}",
        f"paths.experiments={tmp_path / 'experiments'}",
        f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
        "evaluation.bootstrap.resamples=200",
        "comparison.permutations=999",
        "comparison.plots=false",  # ~1 s a figure here; tests that check plots turn them on
        "evaluation.min_gold_coverage=0.9",
    ]

    def make(overrides: Sequence[str] = ()) -> DictConfig:
        return compose([*base, *overrides])

    make.base = base  # type: ignore[attr-defined]  (sweeps recompose trials from the same overrides)
    return make
