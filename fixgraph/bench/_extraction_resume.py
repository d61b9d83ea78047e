"""LLM extraction in a child process: tokens per chunk, and a kill half-way followed by a resume.

Three runs of `fixgraph graph` on a sample of chunks, in a scratch artifacts folder:
1. killed (SIGKILL) once at least half of the sample is journaled;
2. rerun to the end: it must resume the journaled chunks and extract only the rest;
3. a clean run with a fresh journal (the LLM cache replays the same answers, so no model time):
   its records must equal run 2's -- nothing duplicated, nothing lost.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fixgraph.io import RUN_DIR, read_json
from fixgraph.kg.store import GraphStore
from fixgraph.pipeline.layout import Layout

FAKE_ANSWER = {"entities": [{"name": "Settings", "type": "App"}], "relations": []}
HIPPORAG2_TOKENS = {"input": 790, "output": 260}  # per passage, as reported for HippoRAG 2's OpenIE


def _child_config(cfg: DictConfig, root: Path, sample: int, work_dir: Path) -> DictConfig:
    from fixgraph.config import compose

    child = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    if str(cfg.extractor.name) != "llm":
        child.extractor = compose(["extractor=llm"]).extractor
    child.extractor.max_chunks = sample
    child.paths.artifacts = str(root / "artifacts")
    child.tracking.enabled = False
    child.graph.work_dir = str(work_dir)
    child.graph.verification.enabled = False  # extraction alone is measured here
    child.graph.communities.summaries = False
    if child.llm.kind == "fake":
        child.llm.default = FAKE_ANSWER
        child.llm.delay_s = 0.5  # slow enough to be killed half-way
    if "cache" in child.llm:
        child.llm.cache.enabled = True
        child.llm.cache.path = str(root / "llm.sqlite")
    assert isinstance(child, DictConfig)
    return child


def _run(params: Path, wait: bool = True) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "fixgraph.cli", "graph", "--params", str(params)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ))
    if wait:
        _, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"`fixgraph graph` failed: {err.decode()[-1500:]}")
    return proc


def _journal_lines(work_dir: Path) -> list[dict[str, Any]]:
    rows = []
    for path in sorted(work_dir.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
    return rows


def extraction_resume(cfg: DictConfig, sample: int) -> dict[str, Any]:
    layout = Layout.from_config(cfg)
    with tempfile.TemporaryDirectory(prefix="fixgraph-bench-") as tmp:
        root = Path(tmp)
        target = Layout(root / "artifacts", layout.corpus_name)
        shutil.copytree(layout.corpus_dir, target.corpus_dir)
        shutil.copytree(layout.chunks_dir, target.chunks_dir)
        work = root / "journal"
        params = root / "params.yaml"
        OmegaConf.save(_child_config(cfg, root, sample, work), params)
        graph_dir = target.artifacts / "graph" / layout.corpus_name

        started = time.perf_counter()
        proc = _run(params, wait=False)
        while proc.poll() is None and len(_journal_lines(work)) < max(1, sample // 2):
            time.sleep(0.2)
        killed = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        before_kill = len(_journal_lines(work))
        _run(params)
        resumed_seconds = time.perf_counter() - started
        resumed = GraphStore.read(graph_dir)
        journal = _journal_lines(work)

        clean_params = root / "clean.yaml"
        clean_cfg = OmegaConf.load(params)
        clean_cfg.graph.work_dir = str(root / "journal-clean")
        clean_cfg.graph.grounding.entity_min = float(clean_cfg.graph.grounding.entity_min) - 1e-6  # new stage key
        OmegaConf.save(clean_cfg, clean_params)
        _run(clean_params)
        clean = GraphStore.read(graph_dir)

    ids = [row["chunk_id"] for row in journal]
    report = resumed.report
    run = read_json(graph_dir / RUN_DIR / "graph.json")  # timings and resumed counts of the last build
    tokens = report.get("llm_usage", {}).get("tokens_per_chunk", {})
    return {
        "llm": str(cfg.llm.name),
        "sample_chunks": sample,
        "killed_mid_run": killed,
        "chunks_journaled_before_kill": before_kill,
        "chunks_resumed": run["extraction"]["chunks_resumed"],
        "chunks_total": report["extraction"]["chunks"],
        "duplicated_chunks": len(ids) - len(set(ids)),
        "lost_chunks": sample - len(set(ids)),
        "records_equal_clean_run": sorted(resumed.mentions["record_id"]) == sorted(clean.mentions["record_id"]),
        "duplicated_records": int(resumed.mentions["record_id"].duplicated().sum()),
        "failed_chunks": report["extraction"]["failed_chunks"],
        "tokens_per_chunk": tokens,
        "vs_hipporag2_tokens": {
            "input_ratio": round(tokens.get("input_mean", 0) / HIPPORAG2_TOKENS["input"], 3),
            "output_ratio": round(tokens.get("output_mean", 0) / HIPPORAG2_TOKENS["output"], 3),
        },
        "llm_seconds_per_chunk": round(run["llm_usage"]["extract"]["seconds"] / max(1, sample - before_kill), 2)
        if run.get("llm_usage", {}).get("extract")
        else None,
        "wall_seconds_killed_plus_resumed": round(resumed_seconds, 1),
        "grounding_rejections": report["rejections_by_reason"],
        "accepted_mentions": report["records"]["accepted_mentions"],
    }
