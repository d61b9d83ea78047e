"""`fixgraph fit-ltr` end to end on the fixture corpus: signal rows from dev questions only, the weights
written as a retriever config that evaluates like any other, an MLflow run, and refusals before any work."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import DictConfig

from fixgraph.cli import main
from fixgraph.evaluation.questions import load_questions
from fixgraph.retrieval.ltr import SIGNALS
from tests.conftest import CONF

# ltr with the hashing embedder in both of its dense stages (the shipped one loads mpnet)
LTR_HASH = """defaults:
  - ltr
  - override /embedder@first_stage.embedder: hashing
  - override /embedder@first_stage.first_stage.embedder: hashing
  - _self_
name: ltr_hash
"""


@pytest.fixture
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, protocol_config: Callable[..., DictConfig]
) -> tuple[Path, list[str]]:
    """A copy of conf/ with ltr_hash, and protocol_config's overrides less the corpus (each part names its own)."""
    conf = tmp_path / "conf"
    shutil.copytree(CONF, conf)
    (conf / "retriever" / "ltr_hash.yaml").write_text(LTR_HASH)
    monkeypatch.setenv("FIXGRAPH_CONFIG_DIR", str(conf))
    base: list[str] = protocol_config.base  # type: ignore[attr-defined]
    return conf, [o for o in base if not o.startswith("corpus=")]


def test_fit_ltr_writes_a_config_from_dev_questions_only(
    project: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import mlflow

    conf, overrides = project
    argv = ["fit-ltr", "--parts", "dev:mallard_folder", "--system", "ltr_hash", "--hold-out", "none"]
    assert main([*argv, "--write", "ltr_hash_fitted", *overrides]) == 0
    out = capsys.readouterr().out
    written = conf / "retriever" / "ltr_hash_fitted.yaml"
    text = written.read_text()
    assert text in out and f"wrote {written}" in out
    # the signal rows: every candidate of each answerable dev question, none of the locked test part
    parts = {q: v["part"] for q, v in json.loads((tmp_path / "split.json").read_text())["questions"].items()}
    answerable = {q.qid for q in load_questions(tmp_path / "pool.jsonl") if q.answerable}
    dev = {q for q in answerable if parts[q] == "dev"}
    rows = pd.read_parquet(tmp_path / "artifacts" / "ltr_fit" / "ltr_hash_fitted" / "signals.parquet")
    assert set(rows["qid"]) == dev and "test" in parts.values()
    assert set(SIGNALS) <= set(rows.columns) and rows.groupby("qid")["gold"].any().all()
    header = " ".join(line.removeprefix("# ") for line in text.splitlines() if line.startswith("#"))
    assert f"from {len(dev)} questions (dev:mallard_folder {len(dev)})" in header

    # the written config is a system like any other: it composes, inherits ltr_hash, and evaluates
    assert main(["evaluate", "--no-track", "experiment=single", "retriever=ltr_hash_fitted", *overrides]) == 0
    assert "| ltr_hash_fitted |" in capsys.readouterr().out

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = mlflow.search_runs(
        search_all_experiments=True, filter_string="tags.stage = 'fit-ltr'", output_format="list"
    )
    assert run.data.params["parts"] == "dev:mallard_folder" and run.data.params["questions"] == str(len(dev))
    assert {f"weight.{s}" for s in SIGNALS} <= set(run.data.metrics)


def test_fit_ltr_refuses_before_any_work(
    project: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, overrides = project
    base = ["fit-ltr", "--system", "ltr_hash", "--no-track"]
    refusals = [
        (["--parts", "dev:mallard_folder", "--write", "ltr_hash"], "give a new retriever name"),
        (["--parts", "dev:mallard_folder", "--write", "ltr"], "conf/retriever/ltr.yaml exists"),
        (
            ["--parts", "dev:mallard_folder", "--write", "x", "systems.ltr_hash.candidates=5"],
            "without systems.ltr_hash",
        ),
        (["--parts", "dev:mallard_folder"], "--hold-out corpus needs at least two corpora"),
        (["--parts", "dev"], "'dev' is not split:corpus"),
        (["--parts", "dev:mallard_folder", "--hold-out", "none", "corpus=mallard_folder"], "each part names its"),
    ]
    for extra, message in refusals:
        assert main([*base, *extra, *overrides]) == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "artifacts").exists()  # nothing was ingested, chunked or indexed

    # the locked test part is refused by the split itself, as everywhere
    assert main([*base, "--parts", "test:mallard_folder", "--hold-out", "none", *overrides]) == 2
    assert "locked" in capsys.readouterr().err
    assert not (tmp_path / "artifacts" / "ltr_fit").exists()


def test_a_part_may_be_a_question_file_and_is_guarded_like_a_split(
    project: tuple[Path, list[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A team without labelled questions fits on questions generated from its corpus: any question file,
    with the locked test questions refused as everywhere, and a question in two parts refused."""
    _, overrides = project
    parts = {q: v["part"] for q, v in json.loads((tmp_path / "split.json").read_text())["questions"].items()}
    pool = (tmp_path / "pool.jsonl").read_text().splitlines()
    dev_lines = [line for line in pool if parts[json.loads(line)["qid"]] == "dev"]
    test_line = next(line for line in pool if parts[json.loads(line)["qid"]] == "test")
    generated, leaky = tmp_path / "generated.jsonl", tmp_path / "leaky.jsonl"
    generated.write_text("\n".join(dev_lines[:6]) + "\n")
    leaky.write_text("\n".join([*dev_lines[6:], test_line]) + "\n")
    base = ["fit-ltr", "--system", "ltr_hash", "--no-track", "--hold-out", "none", *overrides]

    assert main([*base, "--parts", f"{generated}:mallard_folder"]) == 0
    rows = pd.read_parquet(tmp_path / "artifacts" / "ltr_fit" / "ltr_hash_fitted" / "signals.parquet")
    answerable = {q.qid for q in load_questions(generated) if q.answerable}
    assert set(rows["qid"]) == answerable and rows["part"].eq(f"{generated}:mallard_folder").all()
    capsys.readouterr()

    assert main([*base, "--parts", f"{leaky}:mallard_folder"]) == 2
    assert "1 of 6 questions are locked test questions" in capsys.readouterr().err
    assert main([*base, "--parts", f"{generated}:mallard_folder,dev:mallard_folder"]) == 2
    assert f"parts {generated}:mallard_folder and dev:mallard_folder share questions" in capsys.readouterr().err
    assert main([*base, "--parts", f"{tmp_path / 'none.jsonl'}:mallard_folder"]) == 2
    assert f"question file {tmp_path / 'none.jsonl'} not found" in capsys.readouterr().err
