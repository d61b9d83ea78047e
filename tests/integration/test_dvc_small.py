"""Slow: `dvc repro` and `dvc exp run -S` drive the runner on a small pipeline (the fixture corpus).

A copy of the repository with the fixture pages as its corpus, the 16-question fixture pool and the
hashing embedder: every stage of dvc.yaml runs (split, ingest, chunk, index@*, evaluate), then only
what a parameter change touches. That dvc.lock does not depend on the folder or the cache state is
checked by .ci/run (a fresh clone must reproduce the committed GNOME Help lock) and, file by file, by
test_byte_stable.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import SMALL_PROJECT, copy_repository, make_project, stages_run

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
SMALL = [*SMALL_PROJECT, "comparison.plots=false"]


def sh(cwd: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    env.pop("FIXGRAPH_CONFIG_DIR", None)
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=env, timeout=1200, check=False)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_dvc_repro_and_exp_run_drive_the_runner(tmp_path: Path) -> None:
    root = tmp_path / "project"
    copy_repository(root)
    make_project(root)
    sh(root, "fixgraph", "params", *SMALL)
    sh(root, "git", "init", "-q")
    sh(root, "git", "add", "-A")
    sh(root, "git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "small project")

    first = sh(root, "dvc", "repro")
    every = {"split", "ingest", "chunk", "graph", "index@bm25", "index@dense", "index@hybrid", "evaluate"}
    assert stages_run(first) == every
    split = json.loads((root / "benchmarks/small/split.json").read_text())
    assert sum(split["counts"]["dev"].values()) == 11
    info = json.loads((root / "artifacts/eval/mallard_folder/dev/info.json").read_text())
    assert info["questions"] == 11 and info["misses"]["k"] == 8
    comparison = json.loads((root / "artifacts/eval/mallard_folder/dev/comparison.json").read_text())
    assert comparison["baseline"] == "bm25"
    family = {tuple(h) for h in comparison["family"]["hypotheses"]}
    assert family == {("dense", "recall_at_8"), ("hybrid", "recall_at_8")}

    assert stages_run(sh(root, "dvc", "repro")) == set()
    # the answers pipeline is separate (it needs a real LLM; here the fake one) and reuses every upstream stage
    assert stages_run(sh(root, "dvc", "repro", "pipelines/answers/dvc.yaml")) == {"pipelines/answers/dvc.yaml:answers"}
    answers = json.loads((root / "artifacts/metrics/mallard_folder/answers_dev.json").read_text())
    assert set(answers) == {"closed_book", "bm25", "dense", "hybrid"}
    assert all(0 <= scores["correctness"] <= 1 for scores in answers.values())
    sh(root, "git", "add", "-A")
    sh(root, "git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "reproduced")

    # dvc exp run recomposes conf/ with the overrides (Hydra), writes params.yaml and reruns downstream only
    exp = sh(root, "dvc", "exp", "run", *(f"-S={o}" for o in SMALL), "-S=systems.bm25.k1=1.2")
    assert stages_run(exp) == {"index@bm25", "evaluate"}
    shown = sh(root, "dvc", "exp", "show", "--json").stdout
    assert "1.2" in shown

    # an edited pool question stops the pipeline at the split stage, naming it
    pool = root / "benchmarks/small/pool.jsonl"
    lines = pool.read_text().splitlines()
    lines[0] = lines[0].replace('"answer": ""', '"answer": "edited"')
    pool.write_text("\n".join(lines) + "\n")
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    env.pop("FIXGRAPH_CONFIG_DIR", None)
    tampered = subprocess.run(["dvc", "repro"], cwd=root, capture_output=True, text=True, env=env, check=False)
    assert tampered.returncode != 0
    assert "question 'p-01' was edited since the split was frozen" in tampered.stdout + tampered.stderr
