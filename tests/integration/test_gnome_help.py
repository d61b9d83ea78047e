"""Slow: the real corpus, real MiniLM, `dvc repro` and the MLflow server, as a new user meets them."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.integration.conftest import copy_repository, stages_run

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
    """A copy of the repository's files (as a fresh clone would have them) with GNOME Help fetched. The
    checkout's pipeline outputs come along with their DVC cache entries when it has them (CI's `make main`
    on its fresh clone just built them from scratch, and checked that they reproduce dvc.lock): `dvc repro`
    here then verifies them instead of building them a second time. Without them it runs the stages (and
    where they are stale, those), with the embedding cache's MiniLM vectors when there is one."""
    root = tmp_path_factory.mktemp("clone")
    copy_repository(root, gnome_help=True)
    for cache in ("artifacts/cache/embeddings", "artifacts/candidates"):
        if (REPO / cache).is_dir():
            shutil.copytree(REPO / cache, root / cache)
    copy_pipeline_outputs(REPO, root)
    sh(root, "git", "init", "-q")
    sh(root, "git", "add", "-A")
    sh(root, "git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "snapshot")
    sh(root, "fixgraph", "fetch")
    yield root


def copy_pipeline_outputs(source: Path, target: Path) -> None:
    """The outputs dvc.lock records for dvc.yaml (but those git tracks, already in `target`), with their
    objects in DVC's cache: without them DVC reports an output "not in cache" and runs its stage again.
    Nothing is copied unless `source` has every one of them."""
    cache = Path(".dvc/cache/files/md5")
    stages = yaml.safe_load((source / "dvc.lock").read_text())["stages"].values()
    outs = [out for stage in stages for out in stage.get("outs", []) if not (target / out["path"]).exists()]
    objects = []
    for out in outs:
        md5 = str(out["md5"])
        objects.append(cache / md5[:2] / md5[2:])
        if md5.endswith(".dir") and (source / objects[-1]).is_file():
            entries = json.loads((source / objects[-1]).read_text())
            objects += [cache / e["md5"][:2] / e["md5"][2:] for e in entries]
    paths = [Path(out["path"]) for out in outs] + objects
    if not all((source / path).exists() for path in paths):
        return
    for path in paths:
        (target / path).parent.mkdir(parents=True, exist_ok=True)
        if (source / path).is_dir():
            shutil.copytree(source / path, target / path, dirs_exist_ok=True)
        else:
            shutil.copy2(source / path, target / path)


def test_fetched_snapshot_matches_data_dvc(project: Path) -> None:
    """Adding the fetched snapshot afresh must reproduce the hash data.dvc pins. data.dvc pins the
    default corpus's folder, not `data/`: a second corpus fetched beside it leaves it unchanged."""
    pinned = yaml.safe_load((project / "data.dvc").read_text())["outs"][0]
    assert pinned["path"] == "data/gnome_help"
    # DVC refuses a .dvc file under the git-ignored data/; a folder's hash does not depend on where it is
    check = project / "snapshot_check"
    shutil.copytree(project / "data/gnome_help", check / "gnome_help")
    try:
        sh(project, "dvc", "add", "snapshot_check/gnome_help")
        added = yaml.safe_load((check / "gnome_help.dvc").read_text())["outs"][0]
    finally:
        shutil.rmtree(check)
    assert {k: added[k] for k in ("md5", "size", "nfiles")} == {k: pinned[k] for k in ("md5", "size", "nfiles")}
    (project / "data/other_corpus").mkdir()
    (project / "data/other_corpus/a.page").write_text("<page/>")
    try:
        assert "up to date" in sh(project, "dvc", "status", "data.dvc").stdout
    finally:
        shutil.rmtree(project / "data/other_corpus")


def table_rows(markdown: str) -> list[list[str]]:
    """The cells of a markdown's first table row that starts with bm25, and of the rows after it."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| bm25 "))
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_dvc_repro_reproduces_the_lock_then_runs_only_downstream_of_a_change(project: Path) -> None:
    lock = (project / "dvc.lock").read_text()
    # every stage runs, or those whose outputs did not come along from the checkout (none in CI); either way
    # the outputs must reproduce the committed lock (test_dvc_small.py: which stages run, on a small corpus)
    first = sh(project, "dvc", "repro")
    assert (project / "dvc.lock").read_text() == lock, "dvc.lock is not in step with the code: run make main"
    # the committed split file is the stage's recorded output: frozen, so it is verified, not re-split
    assert "Stage 'split' didn't change, skipping" in first.stdout
    graph = json.loads((project / "artifacts/graph/gnome_help/report.json").read_text())
    assert graph["extractor"]["name"] == "structural" and graph["extraction"]["chunks"] > 500
    assert graph["nodes_by_type"]["Article"] == 293  # one per page of GNOME Help 43.0-2
    assert graph["provenance"]["mentions_span_equals_evidence"] == 1.0
    table = (project / "artifacts/eval/gnome_help/dev/table.md").read_text()
    # the README shows a new user this table as `make main` prints it: the same rows, cell for cell
    assert table_rows(table) == table_rows((project / "README.md").read_text())
    info = json.loads((project / "artifacts/eval/gnome_help/dev/info.json").read_text())
    assert info["gold_coverage"] >= 0.98
    assert info["questions"] == 80  # the dev part of the frozen split (35 test questions stay locked)
    comparison = json.loads((project / "artifacts/eval/gnome_help/dev/comparison.json").read_text())
    assert comparison["baseline"] == "bm25" and len(comparison["rows"]) == 15

    second = sh(project, "dvc", "repro")
    assert "Running stage" not in second.stdout

    sh(project, "fixgraph", "params", "systems.bm25.k1=1.2")
    assert stages_run(sh(project, "dvc", "repro")) == {"index@bm25", "evaluate"}
    assert "evaluate" in sh(project, "dvc", "dag").stdout


def test_bm25_still_scores_what_it_scored(project: Path) -> None:
    """The GNOME Help expected-score file (BM25, no model: exact) still holds."""
    done = sh(project, "fixgraph", "expected", "check", "benchmarks/expected/gnome-help-dev-bm25.yaml")
    assert "gnome-help-dev-bm25.yaml: ok" in done.stdout


def test_sweep_of_50_trials_on_dev_shows_as_parent_with_children(project: Path) -> None:
    """`fixgraph sweep` on the GNOME Help dev questions: one MLflow parent, one child per trial."""
    if not (project / "artifacts/indexes/gnome_help/hybrid").exists():
        sh(project, "dvc", "repro")
    done = sh(project, "fixgraph", "sweep", "--trials", "50", "--study", "slow-suite")
    assert "50 complete" in done.stdout
    assert "cached" in done.stdout.split("scored via ")[1].split(";")[0]  # replayed from the candidate cache
    parent = done.stdout.split("MLflow parent run ")[1].split(";")[0]
    query = (
        "import json, mlflow; mlflow.set_tracking_uri('sqlite:///mlflow.db'); "
        f"p = mlflow.get_run('{parent}'); "
        "c = mlflow.search_runs([p.info.experiment_id], "
        f"filter_string=\"tags.mlflow.parentRunId = '{parent}'\", output_format='list', max_results=500); "
        "print(json.dumps([p.data.tags['stage'], len(c), sorted({r.data.tags['stage'] for r in c})]))"
    )
    stage, children, child_stages = json.loads(sh(project, str(BIN / "python"), "-c", query).stdout.splitlines()[-1])
    assert (stage, children, child_stages) == ("sweep", 50, ["sweep_trial"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_mlflow_ui_lists_runs_with_params_metrics_artifacts(project: Path) -> None:
    if not (project / "mlflow.db").exists():  # run alone: nothing has recorded an evaluation here yet
        sh(project, "fixgraph", "evaluate", "--params", "params.yaml")
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
            "--workers",
            "1",
        ],
        cwd=project,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 300  # ~10 s on an idle machine; much longer on a loaded one
        while True:
            assert server.poll() is None, "mlflow server exited"
            try:
                urllib.request.urlopen(f"{base}/health", timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline, "mlflow server did not answer within 300 s"
                time.sleep(1)
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
        os.killpg(server.pid, signal.SIGTERM)  # the server's workers are in its process group
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
