"""The `fixgraph` command: external question files, and clear errors for bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import CONF, FIXTURES


def fixgraph(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fixgraph.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"FIXGRAPH_CONFIG_DIR": str(CONF), "PATH": "/usr/bin:/bin"},
        check=False,
    )


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    shutil.copytree(FIXTURES / "mallard", tmp_path / "data" / "mallard_folder")
    return tmp_path


OVERRIDES = (
    "corpus=mallard_folder",
    "embedder=hashing",
    "evaluation.min_gold_coverage=0.5",
    "evaluation.bootstrap.resamples=100",
)


def test_evaluate_any_question_file(workdir: Path) -> None:
    external = workdir / "elsewhere" / "my-questions.jsonl"
    external.parent.mkdir()
    lines = (FIXTURES / "questions.jsonl").read_text().splitlines()[:3]
    external.write_text("\n".join(lines) + "\n")
    done = fixgraph(workdir, "evaluate", "--questions", str(external), *OVERRIDES)
    assert done.returncode == 0, done.stderr
    # named <stem>-<hash of the question set>: two sets with one stem never share a folder
    (out,) = (workdir / "artifacts/eval/mallard_folder").glob("my-questions-*")
    assert f"{out.name}: 3 questions, gold coverage 100.0%" in done.stdout and len(out.name) == len("my-questions-") + 8
    assert f"outputs: {out.relative_to(workdir)}" in done.stdout
    assert "| hybrid" in done.stdout
    assert (out / "runs/hybrid.trec").exists()
    assert (workdir / "mlflow.db").exists()


def test_missing_corpus_names_fetch_command(tmp_path: Path) -> None:
    done = fixgraph(tmp_path, "ingest", "corpus=gnome_help", "paths.data=nowhere")
    assert done.returncode == 2
    assert "Fetch it with: fixgraph fetch corpus=gnome_help" in done.stderr
    assert "Traceback" not in done.stderr


def test_unknown_option_lists_valid_ones(tmp_path: Path) -> None:
    done = fixgraph(tmp_path, "config", "retriever=bm52")
    assert done.returncode == 2
    assert "Could not find 'retriever/bm52'" in done.stderr and "hybrid" in done.stderr


def test_malformed_question_line_loses_nothing(workdir: Path) -> None:
    ok = fixgraph(workdir, "chunk", *OVERRIDES)
    assert ok.returncode == 0, ok.stderr
    chunks = workdir / "artifacts/chunks/mallard_folder/chunks.parquet"
    before = chunks.stat().st_mtime_ns
    bad = workdir / "bad.jsonl"
    good = json.loads((FIXTURES / "questions.jsonl").read_text().splitlines()[0])
    bad.write_text(json.dumps(good) + "\n" + json.dumps({**good, "qid": "z", "gold": [{"quote": "x"}]}) + "\n")
    done = fixgraph(workdir, "evaluate", "--questions", str(bad), *OVERRIDES)
    assert done.returncode == 2
    assert f"{bad}:2: field 'gold.0': needs 'page' (a document id) or 'url'" in done.stderr
    assert chunks.stat().st_mtime_ns == before
