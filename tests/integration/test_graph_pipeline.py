"""The graph stage and the graph retrieval experiment end to end on the fixture corpus."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from fixgraph.experiment.runners import build_experiment
from fixgraph.kg.store import GraphStore
from fixgraph.pipeline import graph as graph_stage

LLM_ANSWER = (
    "llm.default={entities:[{name:hub,type:Concept},{name:Settings,type:UIElement},{name:nowhere-thing,type:Concept}],"
    "relations:[]}"
)


def test_structural_graph_stage_builds_reports_and_logs(fixture_config: Callable[..., DictConfig]) -> None:
    import mlflow

    cfg = fixture_config()
    result = graph_stage.build(cfg)
    assert result.status == "built" and graph_stage.build(cfg).status == "cached"
    store = GraphStore.read(result.output)
    report = store.report
    assert report["nodes"] == len(store.nodes) > 0 and report["edges"] == len(store.edges) > 0
    assert report["nodes_by_type"]["Problem"] == 2 and report["nodes_by_type"]["Article"] == 4
    assert report["provenance"]["mentions_span_equals_evidence"] == 1.0
    assert report["provenance"]["edges_with_provenance"] == 1.0
    assert set(store.nodes["community"]) and (store.nodes["community"] >= 0).all()
    assert (result.output / "node_vectors.npy").exists()
    mlflow.set_tracking_uri(str(cfg.tracking.uri))
    runs = mlflow.search_runs(experiment_names=[str(cfg.tracking.experiment)], filter_string="tags.stage = 'graph'")
    assert len(runs) == 1
    assert runs.iloc[0]["metrics.nodes"] == report["nodes"]
    assert runs.iloc[0]["metrics.provenance_edges_with_provenance"] == 1.0


def test_llm_extractor_end_to_end_with_the_fake_llm(fixture_config: Callable[..., DictConfig]) -> None:
    from fixgraph.pipeline.stages import load_chunks

    cfg = fixture_config(["extractor=llm", "tracking.enabled=false", LLM_ANSWER])
    report = GraphStore.read(graph_stage.build(cfg).output).report
    # every chunk gets the same answer; a name is grounded where the chunk contains it
    texts = [c.text.casefold() for c in load_chunks(cfg)]
    missing = sum(name not in text for text in texts for name in ("hub", "settings", "nowhere-thing"))
    chunks = report["extraction"]["chunks"]
    assert chunks == len(texts) and report["records"]["extracted"] == 3 * chunks
    assert report["rejections_by_reason"] == {"entity_not_in_text": missing}
    assert report["records"]["accepted_mentions"] == 3 * chunks - missing
    tokens = report["llm_usage"]["tokens_per_chunk"]
    assert tokens["chunks"] == chunks and tokens["input_mean"] > tokens["output_mean"] > 0
    assert report["llm_usage"]["extract"]["calls"] == chunks


def test_graph_retrieval_experiment_compares_graph_systems_with_hybrid(
    fixture_config: Callable[..., DictConfig],
) -> None:
    cfg = fixture_config(["experiment=graph_retrieval", "comparison.permutations=200"])
    result = build_experiment(cfg.experiment).run(cfg)
    systems = [
        "dense",
        "hybrid",
        "ppr_hipporag1",
        "ppr_hipporag2",
        "typed_paths",
        "article_links",
        "link_prior",
        "graph_fusion",
    ]
    assert result.info["systems"] == systems
    comparison = json.loads((result.output_dir / "comparison.json").read_text())
    family = {tuple(h) for h in comparison["family"]["hypotheses"]}
    assert family == {(s, "recall_at_8") for s in systems if s != "hybrid"} and comparison["baseline"] == "hybrid"
    tested = [r for r in comparison["rows"] if r["system"] != "hybrid"]
    assert all(0 < r["p"] <= 1 for r in tested)
    assert all(r["p_holm"] >= r["p"] for r in tested if r["in_family"])
    assert "p_Holm=" in result.table
    seeds = [
        json.loads(line) for line in (result.output_dir / "traces" / "ppr_hipporag1.jsonl").read_text().splitlines()
    ]
    assert len(seeds) == result.info["questions"] and all("seeds" in row and "qid" in row for row in seeds)
    assert any(row["seeds"] for row in seeds)


@pytest.mark.slow
def test_killed_llm_extraction_resumes_without_duplicates_or_losses(
    fixture_config: Callable[..., DictConfig], tmp_path: Path
) -> None:
    """A real process is SIGKILLed mid-extraction, then rerun: the graph equals an uninterrupted run's."""
    cfg = fixture_config()
    overrides = [
        f"{k}={v}"
        for k, v in {
            "corpus": "mallard_folder",
            "corpus.snapshot_dir": cfg.corpus.snapshot_dir,
            "embedder": "hashing",
            "paths.artifacts": cfg.paths.artifacts,
            "tracking.enabled": "false",
            "extractor": "llm",
            "llm.delay_s": "0.6",
            "graph.verification.enabled": "false",
        }.items()
    ] + [LLM_ANSWER]
    cmd = [sys.executable, "-m", "fixgraph.cli", "graph", *overrides]
    env = {**os.environ, "FIXGRAPH_CONFIG_DIR": str(Path(__file__).resolve().parents[2] / "conf")}
    subprocess.run([*cmd[:3], "chunk", *overrides], check=True, env=env, capture_output=True)
    journal_dir = Path(cfg.paths.artifacts) / "cache" / "extraction"
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:
        lines = sum(len(p.read_text().splitlines()) for p in journal_dir.glob("*.jsonl")) if journal_dir.exists() else 0
        if lines >= 2:
            break
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    (journal,) = journal_dir.glob("*.jsonl")
    done_before = len(journal.read_text().splitlines())
    assert 2 <= done_before < 6, "the kill must land mid-way"
    subprocess.run(cmd, check=True, env=env, capture_output=True)
    graph_dir = Path(cfg.paths.artifacts) / "graph" / "mallard_folder"
    resumed = GraphStore.read(graph_dir)
    # run statistics live under _run/ (outside DVC's hashes), not in report.json
    assert "chunks_resumed" not in resumed.report["extraction"]
    assert json.loads((graph_dir / "_run" / "graph.json").read_text())["extraction"]["chunks_resumed"] == done_before
    chunk_ids = [json.loads(line)["chunk_id"] for line in journal.read_text().splitlines()]
    assert len(chunk_ids) == len(set(chunk_ids)) == resumed.report["extraction"]["chunks"]
    # an uninterrupted run from scratch yields the same records
    journal.unlink()
    # (a threshold nudge gives the stage a new key, so it really runs again instead of reusing the output)
    subprocess.run([*cmd, "graph.grounding.entity_min=89.99"], check=True, env=env, capture_output=True)
    clean = GraphStore.read(graph_dir)
    assert json.loads((graph_dir / "_run" / "graph.json").read_text())["extraction"]["chunks_resumed"] == 0
    assert sorted(clean.mentions["record_id"]) == sorted(resumed.mentions["record_id"])
    assert resumed.mentions["record_id"].is_unique
