"""The graph quality report: counts by type, provenance coverage, rejections by reason, merges,
verification before/after, communities and LLM usage. Written as report.json and logged to MLflow."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from fixgraph.corpus.models import Chunk, Document
from fixgraph.kg.store import GraphStore


def provenance_coverage(
    store: GraphStore, documents: Mapping[str, Document], chunks: Sequence[Chunk]
) -> dict[str, Any]:
    """How much of the graph traces back to text, and how much of the text the graph covers."""
    m = store.mentions
    entity_nodes = set(m.loc[m["role"] == "entity", "node_id"])
    traced_edges = set(m.loc[m["role"] == "relation", "edge_id"])
    complete = m["chunk_id"].astype(bool) & (m["end"] >= m["start"]) & m["extractor"].astype(bool)
    exact = [
        documents[d].text[s:e] == ev if d in documents else False
        for d, s, e, ev in zip(m["doc_id"], m["start"], m["end"], m["evidence"], strict=True)
    ]
    n_nodes, n_edges = len(store.nodes), len(store.edges)
    return {
        "mentions_with_full_provenance": float(complete.mean()) if len(m) else 0.0,
        "mentions_span_equals_evidence": float(sum(exact) / len(exact)) if exact else 0.0,
        "nodes_with_mention": len(entity_nodes & set(store.nodes["node_id"])) / n_nodes if n_nodes else 0.0,
        "nodes_with_any_provenance": 1.0 if n_nodes else 0.0,  # every node comes from a record by construction
        "edges_with_provenance": len(traced_edges & set(store.edges["edge_id"])) / n_edges if n_edges else 0.0,
        "chunks_with_records": len(set(m["chunk_id"]) & {c.id for c in chunks}) / len(chunks) if chunks else 0.0,
        "documents_with_records": len(set(m["doc_id"])) / len(documents) if documents else 0.0,
    }


def tokens_per_chunk(per_chunk: Sequence[Mapping[str, int]]) -> dict[str, float]:
    if not per_chunk:
        return {}
    inputs = [c["input_tokens"] for c in per_chunk]
    outputs = [c["output_tokens"] for c in per_chunk]
    return {
        "chunks": len(per_chunk),
        "input_mean": round(statistics.fmean(inputs), 1),
        "input_median": float(statistics.median(inputs)),
        "output_mean": round(statistics.fmean(outputs), 1),
        "output_median": float(statistics.median(outputs)),
    }


def quality_report(
    store: GraphStore,
    documents: Mapping[str, Document],
    chunks: Sequence[Chunk],
    extracted: int,
    grounding_rejections: Mapping[str, int],
    verification: Mapping[str, Any],
    communities: Mapping[str, Any],
    extraction: Mapping[str, Any],
    llm_usage: Mapping[str, Any],
) -> dict[str, Any]:
    edges_by_relation = store.edges.groupby("relation").size().sort_index().to_dict()
    return {
        "records": {
            "extracted": extracted,
            "rejected_grounding": int(sum(grounding_rejections.values())),
            "rejected_verification": int(sum(verification.get("rejected_by_reason", {}).values())),
            "accepted_mentions": len(store.mentions),
        },
        "rejections_by_reason": dict(sorted(store.rejections.groupby("reason").size().to_dict().items()))
        if len(store.rejections)
        else {},
        "nodes": len(store.nodes),
        "edges": len(store.edges),
        "nodes_by_type": {str(k): int(v) for k, v in store.nodes.groupby("type").size().sort_index().items()},
        "edges_by_relation": {str(k): int(v) for k, v in edges_by_relation.items()},
        "provenance": provenance_coverage(store, documents, chunks),
        "merges": {
            "surface_forms_merged": len(store.merges),
            "by_rule": {str(k): int(v) for k, v in store.merges.groupby("rule").size().sort_index().items()}
            if len(store.merges)
            else {},
            "nodes_with_merges": int(store.merges["node_id"].nunique()) if len(store.merges) else 0,
        },
        "verification": dict(verification),
        "communities": dict(communities),
        "extraction": dict(extraction),
        "llm_usage": dict(llm_usage),
    }


def report_metrics(report: Mapping[str, Any]) -> dict[str, float]:
    """Flat numeric view for MLflow (metric names without dots or @)."""
    out: dict[str, float] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                walk(value, f"{prefix}{key}_" if prefix or key else "")
        elif isinstance(node, (bool, int | float)):
            out[prefix.rstrip("_")] = float(node)

    walk(report, "")
    return {k.replace(".", "_").replace("@", "_at_").replace(" ", "_"): v for k, v in out.items()}
