"""Helpers shared by integration tests: the small DVC project (fixture corpus, 16-question pool) and the
skip marks of the tests that need the real 0.5B GGUF on llama.cpp."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest

from fixgraph.llm.gguf import model_path
from tests.conftest import FIXTURES, REPO

# the small project's config: the fixture pages as corpus, the hashing embedder, the fixture pool
SMALL_PROJECT = [
    "corpus=mallard_folder",
    "corpus.snapshot_dir=data/mallard_folder",
    "embedder=hashing",
    "splitting.pool=benchmarks/small/pool.jsonl",
    "splitting.file=benchmarks/small/split.json",
    "evaluation.min_gold_coverage=0.9",
    "evaluation.bootstrap.resamples=200",
    "comparison.permutations=999",
]


def copy_repository(root: Path, gnome_help: bool = False) -> None:
    """The repository's tracked and untracked-but-not-ignored files, under `root` (data.dvc, which pins
    GNOME Help, only with `gnome_help`: a fixture-corpus project has no use for it)."""
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for name in files:
        if (REPO / name).is_file() and (gnome_help or name != "data.dvc"):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)


def stages_run(done: subprocess.CompletedProcess[str]) -> set[str]:
    """The stages a `dvc repro` ran, from what it printed."""
    return {line.split("'")[1] for line in done.stdout.splitlines() if line.startswith("Running stage")}


def make_project(root: Path) -> Path:
    """The fixture pages and question pool where SMALL_PROJECT expects them, under `root`."""
    shutil.copytree(FIXTURES / "mallard", root / "data" / "mallard_folder")
    (root / "benchmarks" / "small").mkdir(parents=True)
    shutil.copy(FIXTURES / "protocol_questions.jsonl", root / "benchmarks" / "small" / "pool.jsonl")
    return root


MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
GGUF = model_path(MODEL, REPO / "models")
# slow, and skipped (saying why) without llama-cpp-python or the assembled model
REAL_MODEL = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed: pip install -e '.[llm]'"
    ),
    pytest.mark.skipif(not GGUF.exists(), reason=f"model not assembled: fixgraph llm assemble {MODEL}"),
]
