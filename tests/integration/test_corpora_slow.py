"""Slow: the real corpora fetched from Debian and built end to end (GNOME Help, Evolution help, man pages)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import DictConfig

from fixgraph.cli import main
from fixgraph.config import compose
from fixgraph.io import read_json
from fixgraph.pipeline import stages
from fixgraph.pipeline.layout import Layout

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("corpora")


@pytest.fixture(scope="module")
def config(workdir: Path) -> Callable[..., DictConfig]:
    def make(corpus: str, *overrides: str) -> DictConfig:
        return compose(
            [
                f"corpus={corpus}",
                f"paths.data={workdir / 'data'}",
                f"paths.artifacts={workdir / 'artifacts'}",
                *overrides,
            ]
        )

    return make


def build(cfg: DictConfig) -> tuple[dict, list[dict], pd.DataFrame]:  # type: ignore[type-arg]
    stages.fetch(cfg)
    stages.chunk(cfg)  # runs ingest first
    layout = Layout.from_config(cfg)
    return read_json(layout.manifest), read_json(layout.problems), pd.read_parquet(layout.link_graph)


def assert_every_file_accounted(manifest: dict) -> None:  # type: ignore[type-arg]
    counts = manifest["counts"]
    parts = ("files_with_documents", "files_with_problems_only", "resource_files", "unaccounted_files")
    assert sum(counts[p] for p in parts) == counts["files"]
    assert counts["unaccounted_files"] == 0


def test_gnome_help_all_293_pages_no_unexplained_drop(config: Callable[..., DictConfig]) -> None:
    manifest, problems, links = build(config("gnome_help"))
    counts = manifest["counts"]
    assert counts["files"] == 295 and counts["documents"] == 293 and counts["skipped"] == 0
    assert counts["resource_files"] == 2  # legal.xml (XInclude) and SOURCE.json
    assert_every_file_accounted(manifest)
    assert {p["action"] for p in problems} <= {"warning"}  # only missing-link warnings, each named
    assert manifest["source"]["version"] == "43.0-2"
    assert links.conditional.sum() > 50 and (links.status == "resolved").mean() > 0.9


def test_evolution_help_builds(config: Callable[..., DictConfig]) -> None:
    manifest, _, links = build(config("evolution_help"))
    counts = manifest["counts"]
    assert counts["parsed_documents"] == 207 and counts["skipped"] == 0
    assert counts["documents"] + counts["absorbed_duplicates"] == 207
    assert_every_file_accounted(manifest)
    assert manifest["source"]["version"].startswith("3.46.4-2")
    assert set(links.status) >= {"resolved", "external"}  # help:gnome-help/... links are external
    chunk_info = read_json(Layout.from_config(config("evolution_help")).chunks_dir / "stage.json")["info"]
    assert chunk_info["chunks"] > 300


def test_linux_man_pages_build(config: Callable[..., DictConfig]) -> None:
    manifest, _, links = build(config("linux_man"))
    counts = manifest["counts"]
    assert counts["documents"] > 1000 and counts["skipped"] == 0
    assert_every_file_accounted(manifest)
    docs = {}
    with open(Layout.from_config(config("linux_man")).documents, encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            docs[doc["id"]] = doc
    open2 = docs["open.2"]
    assert {"NAME", "SYNOPSIS", "DESCRIPTION", "ERRORS", "SEE ALSO"} <= {s["title"] for s in open2["sections"]}
    assert {"EACCES", "ENOENT", "EEXIST"} <= {s["text"] for s in open2["spans"] if s["kind"] == "errno"}
    assert sum(1 for d in docs.values() if any(s["title"] == "EXIT STATUS" for s in d["sections"])) >= 5
    see_also = links[links.link_type == "seealso"]
    assert len(see_also) > 5000 and (see_also.status == "resolved").mean() > 0.8
    # wtmp(5) is a symlink to utmp(5) in the package: links through it resolve to utmp.5
    through_alias = links[links.target_doc == "wtmp.5"]
    assert len(through_alias) and set(through_alias.resolved_doc) == {"utmp.5"}


def test_bench_corpus_prints_rates(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "corpus", f"paths.data={workdir / 'data'}", "+bench.corpora=[evolution_help]", "+bench.repeats=1"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    rates = result["corpora"]["evolution_help"]
    assert rates["status"] == "measured" and rates["pages"] == 207
    assert rates["pages_per_s"] > 0 and rates["chunks_per_s"] > 0


def test_diagnosis_of_an_errno_message_reaches_the_errors_entry_of_the_call(config: Callable[..., DictConfig]) -> None:
    """`open: Permission denied (EACCES)` on the real man pages: open(2), its ERRORS section, the EACCES
    entry cited as the cause (BM25 here: the diagnosis does not need the dense index)."""
    from fixgraph.config import systems_of
    from fixgraph.serve.diagnose import Diagnoser

    cfg = config("linux_man", "experiment=single", "retriever=bm25", "tracking.enabled=false")
    build(cfg)
    chunks = stages.load_chunks(cfg)
    system = stages.open_system(cfg, "bm25", systems_of(cfg)["bm25"], chunks)
    diagnoser = Diagnoser({d.id: d for d in stages.load_documents(cfg)}, chunks, None)
    diagnosis = diagnoser.diagnose("open: Permission denied (EACCES)", lambda q, k: (system.search(q, k), {}))
    top = diagnosis.causes[0]
    assert top["doc_id"] == "open.2" and top["section"] == "ERRORS" and top["chunk_id"].startswith("open.2#ERRORS")
    assert top["cause"][0]["text"].startswith("EACCES\nThe requested access to the file is not allowed")
    document = next(d for d in stages.load_documents(cfg) if d.id == "open.2")
    cause = top["cause"][0]
    assert document.text[cause["start"] : cause["end"]] == cause["text"]
