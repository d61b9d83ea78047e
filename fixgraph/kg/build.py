"""Build the knowledge graph: extract -> ground -> verify -> resolve -> store -> communities -> report.

`build_graph(cfg, out)` is the body of the `graph` stage (fixgraph/pipeline/graph.py). LLM
extraction is journaled per chunk under `graph.work_dir`, keyed by the extractor's identity and the
chunk set, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from fixgraph.config import to_dict
from fixgraph.corpus.models import Chunk, Document
from fixgraph.io import RUN_DIR, atomic_path, stable_hash, write_json
from fixgraph.kg.communities import CommunityConfig, community_table, leiden_communities, summarise
from fixgraph.kg.extract import ExtractionContext, Extractor, GraphRecord, build_extractor
from fixgraph.kg.grounding import GroundingConfig, GroundingValidator
from fixgraph.kg.journal import ChunkResult, ExtractionJournal, run_journaled
from fixgraph.kg.ontology import Ontology, build_ontology
from fixgraph.kg.report import quality_report, tokens_per_chunk
from fixgraph.kg.resolve import ResolutionConfig, mentions_of, resolve
from fixgraph.kg.store import GraphStore, assemble_store
from fixgraph.kg.verify import EdgeVerifier, VerificationConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GraphSettings:
    grounding: GroundingConfig
    resolution: ResolutionConfig
    verification: VerificationConfig
    communities: CommunityConfig
    work_dir: Path
    node_vectors: bool

    @classmethod
    def from_config(cls, cfg: DictConfig) -> GraphSettings:
        graph = to_dict(cfg.graph)
        return cls(
            grounding=GroundingConfig.from_config(graph.get("grounding")),
            resolution=ResolutionConfig.from_config(graph.get("resolution")),
            verification=VerificationConfig.from_config(graph.get("verification")),
            communities=CommunityConfig.from_config(graph.get("communities")),
            work_dir=Path(str(graph.get("work_dir", "artifacts/cache/extraction"))),
            node_vectors=bool(graph.get("node_vectors", True)),
        )


def needs_llm(cfg: DictConfig, settings: GraphSettings) -> bool:
    verifies = settings.verification.enabled and str(cfg.extractor.name) in settings.verification.extractors
    summarises = settings.communities.enabled and settings.communities.summaries
    return bool(cfg.extractor.get("uses_llm", False)) or verifies or summarises


def sample_chunks(chunks: Sequence[Chunk], max_chunks: int | None, seed: int) -> list[Chunk]:
    """A deterministic sample spread over the corpus: chunks ordered by a seeded hash of their id."""
    if not max_chunks or max_chunks >= len(chunks):
        return list(chunks)

    def rank(c: Chunk) -> str:
        return hashlib.sha256(f"{seed}:{c.id}".encode()).hexdigest()

    chosen = {c.id for c in sorted(chunks, key=rank)[:max_chunks]}
    return [c for c in chunks if c.id in chosen]


def extract_records(
    extractor: Extractor,
    chunks: Sequence[Chunk],
    journal_path: Path | None,
    mapper: Callable[..., Any] | None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[GraphRecord], dict[str, Any], list[dict[str, int]]]:
    """All records, extraction stats, and per-chunk LLM token counts (empty without an LLM)."""
    started = time.perf_counter()
    resumed = 0
    if journal_path is None:
        results = {c.id: ChunkResult(extractor.extract(c)) for c in chunks}
    else:
        chunk_usage: dict[str, dict[str, int]] = getattr(extractor, "chunk_usage", {})

        def one(chunk: Chunk) -> ChunkResult:
            records = extractor.extract(chunk)
            return ChunkResult(records, chunk_usage.pop(chunk.id, {}))

        results, resumed = run_journaled(one, chunks, ExtractionJournal(journal_path), mapper, progress)
    seconds = time.perf_counter() - started
    records = [r for c in chunks for r in results[c.id].records]
    stats = {
        "chunks": len(chunks),
        "chunks_resumed": resumed,
        "records": len(records),
        "seconds": round(seconds, 3),
        "chunks_per_second": round(len(chunks) / seconds, 2) if seconds > 0 else 0.0,
        "failed_chunks": len(getattr(extractor, "failures", [])),
    }
    usage = [results[c.id].usage for c in chunks if results[c.id].usage]
    return records, stats, usage


def embed_function(cfg: DictConfig) -> Callable[[list[str]], np.ndarray]:
    from fixgraph.embedders.encoders import EmbeddingCache, build_embedder

    embedder = build_embedder(cfg.embedder)
    cache = EmbeddingCache(Path(str(cfg.paths.artifacts)) / "cache" / "embeddings")
    return lambda names: cache.embed(embedder, names)


def write_node_vectors(store: GraphStore, embed: Callable[[list[str]], np.ndarray], cfg: DictConfig, out: Path) -> None:
    """Node name vectors for entity linking, with the embedder identity that made them."""
    from fixgraph.embedders.encoders import build_embedder

    names = list(store.nodes["name"])
    matrix = embed(names) if names else np.zeros((0, 1), dtype=np.float32)
    with atomic_path(out / "node_vectors.npy") as tmp, open(tmp, "wb") as fh:
        np.save(fh, matrix.astype(np.float32))
    write_json(
        out / "node_vectors.json",
        {"embedder": build_embedder(cfg.embedder).identity(), "node_ids": list(store.nodes["node_id"])},
    )


def build_graph(
    cfg: DictConfig,
    documents: Sequence[Document],
    chunks: Sequence[Chunk],
    out: Path,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    settings = GraphSettings.from_config(cfg)
    ontology: Ontology = build_ontology(cfg.ontology)
    llm = None
    if needs_llm(cfg, settings):
        from fixgraph.llm.base import build_llm

        llm = build_llm(cfg.llm)
    docs = {d.id: d for d in documents}
    extractor = build_extractor(cfg.extractor)
    extractor.prepare(ExtractionContext(documents=docs, ontology=ontology, llm=llm))
    sample = sample_chunks(chunks, cfg.extractor.get("max_chunks"), int(cfg.extractor.get("sample_seed", 0)))
    journal = None
    if cfg.extractor.get("uses_llm", False):
        key = stable_hash({"extractor": extractor.identity(), "chunks": [c.content_hash for c in sample]})[:20]
        journal = settings.work_dir / f"{cfg.corpus.name}-{cfg.extractor.name}-{key}.jsonl"
    records, extraction, usage = extract_records(extractor, sample, journal, llm.map if llm else None, progress)
    chunk_map = {c.id: c for c in chunks}
    grounded = GroundingValidator(ontology, settings.grounding).validate(records, chunk_map)
    kept, rejections = grounded.accepted, list(grounded.rejected)
    verification: dict[str, Any] = {
        "enabled": settings.verification.enabled,
        "relations_before": sum(r.is_relation for r in kept),
    }
    if settings.verification.enabled and str(cfg.extractor.name) in settings.verification.extractors:
        assert llm is not None
        verified = EdgeVerifier(llm, settings.verification).verify(kept, chunk_map)
        kept, rejections = verified.kept, rejections + verified.rejected
        verification.update(verified.counts())
    verification["relations_after"] = sum(r.is_relation for r in kept)
    embed = embed_function(cfg) if settings.resolution.embedding or settings.node_vectors else None
    resolution = resolve(mentions_of(kept), ontology, settings.resolution, embed)
    store = assemble_store(kept, resolution, rejections)
    communities: dict[str, Any] = {"enabled": settings.communities.enabled}
    if settings.communities.enabled and len(store.nodes):
        membership, modularity = leiden_communities(store.nodes, store.edges, settings.communities)
        store.nodes["community"] = store.nodes["node_id"].map(membership).astype(int)
        table = community_table(store.nodes, membership)
        if settings.communities.summaries and llm is not None:
            table = summarise(table, store.nodes, llm, settings.communities)
        store.communities = table
        communities.update(
            {
                "count": len(table),
                "modularity": round(modularity, 4),
                "largest": int(table["size"].max()),
                "singletons": int((table["size"] == 1).sum()),
            }
        )
    llm_usage: dict[str, Any] = llm.usage.totals() if llm is not None else {}
    if usage:
        llm_usage["tokens_per_chunk"] = tokens_per_chunk(usage)
    sampled_docs = {c.doc_id: docs[c.doc_id] for c in sample}  # coverage of what was extracted from
    store.report = quality_report(
        store, sampled_docs, sample, len(records), grounded.counts(), verification, communities, extraction, llm_usage
    )
    store.report["extractor"] = {"name": extractor.name, "identity": extractor.identity()}
    run = split_run_stats(store.report)
    store.write(out)
    write_json(out / RUN_DIR / "graph.json", run)
    if settings.node_vectors and embed is not None:
        write_node_vectors(store, embed, cfg, out)
    if llm is not None:
        llm.close()
    return {**store.report, "run": run}


# Statistics of one build rather than of its inputs (a resumed or cache-warm build differs only here)
RUN_STATS = {"extraction": ("seconds", "chunks_per_second", "chunks_resumed"), "llm_usage": ("seconds", "cached_calls")}


def split_run_stats(report: dict[str, Any]) -> dict[str, Any]:
    """Move timings and cache counts out of `report` (written to report.json) into the returned dict."""
    extraction = report.get("extraction", {})
    run: dict[str, Any] = {"extraction": {k: extraction.pop(k) for k in RUN_STATS["extraction"] if k in extraction}}
    usage = {}
    for stage, totals in report.get("llm_usage", {}).items():
        if isinstance(totals, dict):
            usage[stage] = {k: totals.pop(k) for k in RUN_STATS["llm_usage"] if k in totals}
    run["llm_usage"] = usage
    return run
