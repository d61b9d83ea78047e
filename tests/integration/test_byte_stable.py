"""Stage outputs are byte-stable: the same inputs built in two folders, one with a cold and one with a warm
chunk cache, give identical files in every folder DVC tracks (ingest, chunk, graph, index, evaluate).
Run statistics (seconds, chunk-cache hits, latency) live under `_run/`, which .dvcignore keeps out of
DVC's hashes; the slow test below checks the same through `dvc repro` and dvc.lock."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, REPO

SMALL = [
    "corpus=mallard_folder",
    "corpus.snapshot_dir=data/mallard_folder",
    "embedder=hashing",
    "splitting.pool=benchmarks/small/pool.jsonl",
    "splitting.file=benchmarks/small/split.json",
    "evaluation.min_gold_coverage=0.9",
    "evaluation.bootstrap.resamples=200",
    "comparison.permutations=999",
    "tracking.enabled=false",
]
OUTPUTS = ["corpus", "chunks", "graph", "indexes", "eval", "metrics"]  # artifacts/<x>/mallard_folder


def digests(folder: Path) -> dict[str, str]:
    """sha256 of every file DVC would hash (everything but `_run/` folders, as in .dvcignore)."""
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and "_run" not in p.relative_to(folder).parts
    }


def make_project(root: Path) -> Path:
    shutil.copytree(FIXTURES / "mallard", root / "data" / "mallard_folder")
    (root / "benchmarks" / "small").mkdir(parents=True)
    shutil.copy(FIXTURES / "protocol_questions.jsonl", root / "benchmarks" / "small" / "pool.jsonl")
    return root


def build_all(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fixgraph.config import compose, systems_of
    from fixgraph.evaluation.splitting import freeze
    from fixgraph.experiment.runners import build_experiment
    from fixgraph.pipeline import graph, stages

    monkeypatch.chdir(root)
    cfg = compose(SMALL)
    freeze(Path("benchmarks/small/pool.jsonl"), Path("benchmarks/small/split.json"), 0.3, str(cfg.splitting.salt))
    stages.chunk(cfg)
    graph.build(cfg, track=False)
    for name, system_cfg in systems_of(cfg).items():
        stages.index(cfg, name, system_cfg)
    build_experiment(cfg.experiment).run(cfg, None, None, track=False)


def test_outputs_are_byte_identical_across_folders_and_cache_states(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cold = make_project(tmp_path / "clone-a")
    warm = make_project(tmp_path / "somewhere" / "else" / "clone-b")
    build_all(cold, monkeypatch)
    shutil.copytree(cold / "artifacts" / "cache", warm / "artifacts" / "cache")  # a warm chunk cache
    build_all(warm, monkeypatch)
    for output in OUTPUTS:
        a, b = digests(cold / "artifacts" / output), digests(warm / "artifacts" / output)
        assert a and a == b, (
            f"artifacts/{output} differs: {sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))}"
        )
    # the run statistics are there, just not hashed: they do differ between a cold and a warm chunk cache
    run_a = (cold / "artifacts/chunks/mallard_folder/_run/stage.json").read_text()
    run_b = (warm / "artifacts/chunks/mallard_folder/_run/stage.json").read_text()
    assert '"reused": 0' in run_a and '"reused": 0' not in run_b
    assert (warm / "artifacts/eval/mallard_folder/dev/_run/timings.parquet").exists()


@pytest.mark.slow
def test_dvc_repro_leaves_dvc_lock_unchanged(tmp_path: Path) -> None:
    """Two clones in different folders, cold and warm chunk caches: one dvc.lock, and `git diff --exit-code
    dvc.lock` holds after a forced rerun (what .ci/run checks on GNOME Help)."""
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("FIXGRAPH_CONFIG_DIR", None)

    def sh(cwd: Path, *cmd: str) -> str:
        # each clone runs its own copy of the code (the venv's editable install points at this checkout)
        here = {**env, "PYTHONPATH": str(cwd)}
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env=here, timeout=1200, check=False)
        assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        return done.stdout

    files = sh(REPO, "git", "ls-files", "-co", "--exclude-standard").splitlines()
    locks = []
    for clone in (tmp_path / "a", tmp_path / "deeper" / "b"):
        for name in files:
            if (REPO / name).is_file() and name != "data.dvc":
                (clone / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / name, clone / name)
        make_project(clone)
        sh(clone, "fixgraph", "params", *[o for o in SMALL if not o.startswith("tracking")], "tracking.enabled=false")
        if locks:  # the second clone starts with a warm chunk cache
            shutil.copytree(tmp_path / "a" / "artifacts" / "cache", clone / "artifacts" / "cache")
        sh(clone, "git", "init", "-q")
        sh(clone, "dvc", "repro")
        locks.append((clone / "dvc.lock").read_text())
    assert locks[0] == locks[1]
    first = tmp_path / "a"
    sh(first, "git", "add", "-A")
    sh(first, "git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "after repro")
    sh(first, "dvc", "repro", "--force")
    sh(first, "git", "diff", "--exit-code", "dvc.lock")
