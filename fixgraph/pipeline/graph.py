"""The `graph` stage: build the knowledge graph of the corpus and log its quality report to MLflow.

Output: artifacts/graph/<corpus>/ (the folder DVC tracks). Like every stage it is keyed by its config,
its inputs' hashes and the code, and skipped when unchanged.
"""

from __future__ import annotations

import logging
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fixgraph.config import to_dict
from fixgraph.io import RUN_DIR, sha256_file, stable_hash, write_json
from fixgraph.pipeline.layout import Layout
from fixgraph.pipeline.stages import StageResult, chunk, code_hash, load_chunks, load_documents, run_stage

log = logging.getLogger(__name__)


def graph_dir(cfg: DictConfig) -> Path:
    return Path(str(cfg.paths.artifacts)) / "graph" / str(cfg.corpus.name)


def graph_key(cfg: DictConfig) -> str:
    layout = Layout.from_config(cfg)
    parts: dict[str, Any] = {
        "extractor": to_dict(cfg.extractor),
        "ontology": to_dict(cfg.ontology),
        "graph": to_dict(cfg.graph),
        "embedder": to_dict(cfg.embedder),
        "documents": sha256_file(layout.documents),
        "chunks": sha256_file(layout.chunks),
        "code": code_hash("kg", "llm", "embedders"),
    }
    if cfg.extractor.get("uses_llm", False) or cfg.graph.verification.enabled:
        parts["llm"] = to_dict(cfg.llm)
    return stable_hash(parts)


def _progress(done: int, total: int) -> None:
    if total <= 100 or done == total or done % 25 == 0:  # LLM samples are small and slow: log each
        log.info("extract: %d/%d chunks", done, total)


def build(cfg: DictConfig, track: bool | None = None) -> StageResult:
    from fixgraph.kg.build import build_graph

    chunk(cfg)
    documents, chunks = load_documents(cfg), load_chunks(cfg)

    def produce(out: Path) -> dict[str, Any]:
        report = build_graph(cfg, documents, chunks, out, progress=_progress)
        info = {"nodes": report["nodes"], "edges": report["edges"], "extractor": str(cfg.extractor.name)}
        return {**info, "run": report["run"]}

    result = run_stage("graph", graph_dir(cfg), graph_key(cfg), produce)
    if result.status == "built" and (track if track is not None else bool(cfg.tracking.enabled)):
        log_graph(cfg, result.output)
    return result


def log_graph(cfg: DictConfig, folder: Path) -> str:
    """One MLflow run per graph build: the quality report as metrics and as an artifact."""
    import mlflow

    from fixgraph.io import read_json
    from fixgraph.kg.report import report_metrics
    from fixgraph.redact import redact, redact_flat
    from fixgraph.tracking import flatten, git_state, setup

    report = read_json(folder / "report.json")
    run_stats = folder / RUN_DIR / "graph.json"  # timings and cache counts, kept out of DVC's hashes
    if run_stats.exists():
        report = {**report, "run": read_json(run_stats)}
    experiment_id = setup(cfg)
    with mlflow.start_run(
        experiment_id=experiment_id, run_name=f"graph: {cfg.corpus.name} {cfg.extractor.name}"
    ) as run:
        mlflow.set_tags(
            {**git_state(), "stage": "graph", "corpus": str(cfg.corpus.name), "extractor": str(cfg.extractor.name)}
        )
        params = {
            **flatten(to_dict(cfg.extractor), "extractor."),
            **flatten(to_dict(cfg.graph), "graph."),
            "ontology.name": str(cfg.ontology.name),
        }
        if "llm" in report.get("extractor", {}).get("name", "") or report.get("llm_usage"):
            params.update(flatten(to_dict(cfg.llm), "llm."))
        mlflow.log_params(redact_flat(params))
        mlflow.log_metrics(report_metrics(report))
        with tempfile.TemporaryDirectory() as tmp:
            write_json(Path(tmp) / "graph_report.json", report)
            resolved = redact(OmegaConf.to_container(cfg, resolve=True))  # no API keys in MLflow
            (Path(tmp) / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(resolved)))
            mlflow.log_artifacts(tmp)
        return str(run.info.run_id)


def export_graph(cfg: DictConfig, fmt: str, out: Path) -> Path:
    """Write the built graph as neo4j-admin CSV files (a folder) or a Cypher script (a file)."""
    from fixgraph.kg.neo4j import export_csv, export_cypher
    from fixgraph.kg.store import GraphStore

    store = GraphStore.read(graph_dir(cfg))
    if fmt == "csv":
        export_csv(store, out)
        return out
    return export_cypher(store, out)
