"""Slow: a sweep stored in PostgreSQL, two worker processes, no trial done twice.

Starts a private PostgreSQL server (Debian's postgresql package; .ci/run installs it as root) in a
temporary folder on a free port, runs `fixgraph sweep --workers 2 --storage postgresql://...` on the
fixture corpus and checks the study and the MLflow runs.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from omegaconf import DictConfig

pytestmark = pytest.mark.slow


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        pytest.fail("PostgreSQL server binaries not found: `apt-get install postgresql` (as root; .ci/run does)")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def postgres_url() -> Iterator[str]:
    bindir, port = _bindir(), _free_port()
    # not under pytest's tmp folder: that one is private to root, and the server runs as `postgres`
    root = Path(tempfile.mkdtemp(prefix="fixgraph-pg-"))
    data, sockets = root / "data", root / "sock"
    data.mkdir()
    sockets.mkdir()
    # the server refuses to run as root: run it as the `postgres` user the Debian package creates
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        shutil.chown(root, "postgres")
        for path in (data, sockets):
            shutil.chown(path, "postgres")
    run = lambda *cmd: subprocess.run([*as_user, *cmd], check=True, capture_output=True, text=True)  # noqa: E731
    run(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "fixgraph")
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c max_connections=50"
    run(str(bindir / "pg_ctl"), "-D", str(data), "-o", options, "-w", "-l", str(root / "log"), "start")
    try:
        run(str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "fixgraph", "optuna")
        yield f"postgresql://fixgraph@127.0.0.1:{port}/optuna"
    finally:
        run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


def test_two_workers_share_a_postgres_study_without_duplicates(
    protocol_config: Callable[..., DictConfig], postgres_url: str, tmp_path: Path
) -> None:
    import mlflow
    import optuna
    from optuna.trial import TrialState

    from fixgraph.experiment.sweep import driver_url

    cfg = protocol_config()
    trials = 30
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fixgraph.cli",
            "sweep",
            *protocol_config.base,  # type: ignore[attr-defined]
            "--study",
            "pg",
            "--storage",
            postgres_url,
            "--workers",
            "2",
            "--trials",
            str(trials),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert f"{trials} complete" in done.stdout

    study = optuna.load_study(study_name="pg", storage=driver_url(postgres_url))
    every = study.get_trials(deepcopy=False)
    complete = [t for t in every if t.state == TrialState.COMPLETE]
    assert len(complete) == trials
    assert len({t.number for t in every}) == len(every)
    assert len({tuple(sorted(t.params.items())) for t in complete}) == trials  # no parameter set scored twice
    assert not [t for t in every if t.state == TrialState.RUNNING]
    workers = Counter(t.user_attrs["worker"] for t in complete)
    assert set(workers) == {1, 2}, workers  # both processes did work
    for pruned in (t for t in every if t.state == TrialState.PRUNED):
        assert "duplicate_of" in pruned.user_attrs or pruned.user_attrs.get("over_budget")

    mlflow.set_tracking_uri(str(cfg.tracking.uri))
    parent = study.user_attrs["mlflow_parent_run_id"]
    children = mlflow.search_runs(
        experiment_ids=[mlflow.get_run(parent).info.experiment_id],
        filter_string=f"tags.mlflow.parentRunId = '{parent}'",
        output_format="list",
    )
    assert len(children) == trials
    assert sorted(int(c.data.tags["trial"]) for c in children) == sorted(t.number for t in complete)
    assert {c.info.run_id for c in children} == {t.user_attrs["mlflow_run_id"] for t in complete}
