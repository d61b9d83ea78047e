"""Slow: the real corpus, real MiniLM, `dvc repro` and the MLflow server, as a new user meets them."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent


def sh(cwd: Path, *cmd: str, timeout: int = 1800) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    env.pop("FIXGRAPH_CONFIG_DIR", None)
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout, check=False)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A copy of the repository's files (as a fresh clone would have them) with GNOME Help fetched."""
    root = tmp_path_factory.mktemp("clone")
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for name in files:
        if (REPO / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    sh(root, "git", "init", "-q")
    sh(root, "git", "add", "-A")
    sh(root, "git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "snapshot")
    sh(root, "fixgraph", "fetch")
    yield root


def test_fetched_snapshot_matches_data_dvc(project: Path) -> None:
    """Re-adding the fetched snapshot must reproduce the pinned hash in data.dvc byte for byte."""
    pinned = (project / "data.dvc").read_text()
    sh(project, "dvc", "add", "data")
    assert (project / "data.dvc").read_text() == pinned


def test_dvc_repro_runs_once_then_only_downstream_of_a_change(project: Path) -> None:
    first = sh(project, "dvc", "repro")
    for stage in ("ingest", "chunk", "index@bm25", "index@dense", "index@hybrid", "evaluate"):
        assert f"Running stage '{stage}'" in first.stdout
    table = (project / "artifacts/eval/gnome_help/dev/table.md").read_text()
    for system in ("bm25", "dense", "hybrid"):
        assert f"| {system} " in table
    info = json.loads((project / "artifacts/eval/gnome_help/dev/info.json").read_text())
    assert info["gold_coverage"] >= 0.98
    assert info["questions"] == 115

    second = sh(project, "dvc", "repro")
    assert "Running stage" not in second.stdout

    sh(project, "fixgraph", "params", "systems.bm25.k1=1.2")
    third = sh(project, "dvc", "repro")
    ran = {line.split("'")[1] for line in third.stdout.splitlines() if line.startswith("Running stage")}
    assert ran == {"index@bm25", "evaluate"}
    assert "evaluate" in sh(project, "dvc", "dag").stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_mlflow_ui_lists_runs_with_params_metrics_artifacts(project: Path) -> None:
    if not (project / "mlflow.db").exists():
        sh(project, "dvc", "repro")
    port = _free_port()
    server = subprocess.Popen(
        [
            str(BIN / "mlflow"),
            "server",
            "--backend-store-uri",
            "sqlite:///mlflow.db",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(360):  # up to 3 min: the server's 4 workers start slowly on a busy 2-core machine
            try:
                urllib.request.urlopen(f"{base}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        request = urllib.request.Request(
            f"{base}/api/2.0/mlflow/experiments/search",
            data=json.dumps({"max_results": 10}).encode(),
            headers={"Content-Type": "application/json"},
        )
        experiments = json.load(urllib.request.urlopen(request))["experiments"]
        experiment = next(e for e in experiments if e["name"] == "fixgraph")
        request = urllib.request.Request(
            f"{base}/api/2.0/mlflow/runs/search",
            data=json.dumps(
                {"experiment_ids": [experiment["experiment_id"]], "filter": "tags.system = 'hybrid'"}
            ).encode(),
            headers={"Content-Type": "application/json"},
        )
        runs = json.load(urllib.request.urlopen(request))["runs"]
        assert runs
        run = runs[0]
        assert {m["key"] for m in run["data"]["metrics"]} >= {"recall_at_8", "recall_at_8_ci_low", "mrr", "ndcg_at_10"}
        assert any(p["key"] == "retriever.rrf_k" for p in run["data"]["params"])
        artifacts = json.load(
            urllib.request.urlopen(f"{base}/api/2.0/mlflow/artifacts/list?run_id={run['info']['run_id']}")
        )
        assert any(f["path"] == "per_question.csv" for f in artifacts.get("files", []))
    finally:
        server.terminate()
        server.wait(timeout=30)
