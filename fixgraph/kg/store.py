"""The graph on disk: parquet nodes, edges and mentions, every fact traceable to a source span.

- nodes.parquet:    node_id, type, scope (article id for document-scoped types), name, key, aliases,
                    n_mentions, n_chunks, community
- edges.parquet:    edge_id, source, target, relation, weight (= supporting records), n_chunks,
                    extractors, basis
- mentions.parquet: one row per accepted record occurrence: record_id, role (entity | relation),
                    node_id or edge_id, chunk_id, doc_id, start, end, evidence, extractor, model,
                    prompt_version, extracted_at, basis
- rejections.parquet, merges.parquet, communities.parquet, report.json alongside.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from fixgraph.io import atomic_path, read_json, stable_hash, write_json
from fixgraph.kg.extract import GraphRecord
from fixgraph.kg.grounding import Rejection
from fixgraph.kg.resolve import Mention, Resolution

TABLES = ("nodes", "edges", "mentions", "rejections", "merges", "communities")

NODE_COLUMNS = ["node_id", "type", "scope", "name", "key", "aliases", "n_mentions", "n_chunks", "community"]
EDGE_COLUMNS = ["edge_id", "source", "target", "relation", "weight", "n_chunks", "extractors", "basis"]
MENTION_COLUMNS = [
    "record_id",
    "role",
    "node_id",
    "edge_id",
    "chunk_id",
    "doc_id",
    "start",
    "end",
    "evidence",
    "extractor",
    "model",
    "prompt_version",
    "extracted_at",
    "basis",
]


def edge_id(source: str, relation: str, target: str) -> str:
    return stable_hash([source, relation, target])[:16]


@dataclass
class GraphStore:
    nodes: pd.DataFrame
    edges: pd.DataFrame
    mentions: pd.DataFrame
    rejections: pd.DataFrame = field(default_factory=pd.DataFrame)
    merges: pd.DataFrame = field(default_factory=pd.DataFrame)
    communities: pd.DataFrame = field(default_factory=pd.DataFrame)
    report: dict[str, Any] = field(default_factory=dict)

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        for name in TABLES:
            frame: pd.DataFrame = getattr(self, name)
            with atomic_path(folder / f"{name}.parquet") as tmp:
                frame.to_parquet(tmp, index=False)
        write_json(folder / "report.json", self.report)

    @classmethod
    def read(cls, folder: Path) -> GraphStore:
        if not (folder / "nodes.parquet").exists():
            raise FileNotFoundError(f"{folder}: no graph here; build it with `fixgraph graph`")
        tables = {name: pd.read_parquet(folder / f"{name}.parquet") for name in TABLES}
        report = read_json(folder / "report.json") if (folder / "report.json").exists() else {}
        return cls(**tables, report=report)

    def node_chunks(self) -> dict[str, set[str]]:
        """node id -> chunks in which it is mentioned as an entity (HippoRAG's passage-phrase links)."""
        rows = self.mentions[self.mentions["role"] == "entity"]
        out: dict[str, set[str]] = defaultdict(set)
        for node, chunk in zip(rows["node_id"], rows["chunk_id"], strict=True):
            out[node].add(chunk)
        return out

    def edge_chunks(self) -> dict[str, set[str]]:
        rows = self.mentions[self.mentions["role"] == "relation"]
        out: dict[str, set[str]] = defaultdict(set)
        for edge, chunk in zip(rows["edge_id"], rows["chunk_id"], strict=True):
            out[edge].add(chunk)
        return out


def _mention_row(record: GraphRecord, role: str, node: str, edge: str) -> dict[str, Any]:
    p = record.provenance
    return {
        "record_id": record.record_id,
        "role": role,
        "node_id": node,
        "edge_id": edge,
        "chunk_id": p.chunk_id,
        "doc_id": p.doc_id,
        "start": p.start,
        "end": p.end,
        "evidence": record.evidence,
        "extractor": p.extractor,
        "model": p.model,
        "prompt_version": p.prompt_version,
        "extracted_at": p.extracted_at,
        "basis": record.basis,
    }


def assemble_store(
    records: Sequence[GraphRecord], resolution: Resolution, rejections: Sequence[Rejection]
) -> GraphStore:
    """Nodes, edges and mentions from accepted records and the resolution of their entity mentions."""
    mention_rows: list[dict[str, Any]] = []
    edges: dict[str, dict[str, Any]] = {}
    seen_records: set[str] = set()
    for record in records:
        rid = record.record_id
        if rid in seen_records:  # the same fact from the same span, stated twice by one extractor
            continue
        seen_records.add(rid)
        doc_id = record.provenance.doc_id
        subject = resolution.node_of[Mention(record.subject, record.subject_type, doc_id, record.subject_ref)]
        if not record.is_relation:
            mention_rows.append(_mention_row(record, "entity", subject, ""))
            continue
        target = resolution.node_of[Mention(record.object, record.object_type, doc_id, record.object_ref)]
        if subject == target:
            continue  # two names that resolution merged into one node: not an edge
        eid = edge_id(subject, record.relation, target)
        edge = edges.setdefault(
            eid,
            {
                "edge_id": eid,
                "source": subject,
                "target": target,
                "relation": record.relation,
                "records": 0,
                "chunks": set(),
                "extractors": set(),
                "bases": set(),
            },
        )
        edge["records"] += 1
        edge["chunks"].add(record.provenance.chunk_id)
        edge["extractors"].add(record.provenance.extractor)
        edge["bases"].add(record.basis)
        mention_rows.append(_mention_row(record, "relation", "", eid))
    mentions = pd.DataFrame(mention_rows, columns=MENTION_COLUMNS)
    entity_rows = mentions[mentions["role"] == "entity"]
    n_mentions = entity_rows.groupby("node_id").size().to_dict()
    n_chunks = entity_rows.groupby("node_id")["chunk_id"].nunique().to_dict()
    used = set(entity_rows["node_id"]) | {e["source"] for e in edges.values()} | {e["target"] for e in edges.values()}
    nodes = pd.DataFrame(
        [
            {
                "node_id": nid,
                "type": n["type"],
                "scope": n["scope"],
                "name": n["name"],
                "key": n["key"],
                "aliases": n["aliases"],
                "n_mentions": int(n_mentions.get(nid, 0)),
                "n_chunks": int(n_chunks.get(nid, 0)),
                "community": -1,
            }
            for nid, n in sorted(resolution.nodes.items())
            if nid in used
        ],
        columns=NODE_COLUMNS,
    )
    edge_frame = pd.DataFrame(
        [
            {
                "edge_id": e["edge_id"],
                "source": e["source"],
                "target": e["target"],
                "relation": e["relation"],
                "weight": float(e["records"]),
                "n_chunks": len(e["chunks"]),
                "extractors": sorted(e["extractors"]),
                "basis": "+".join(sorted(e["bases"])),
            }
            for e in sorted(edges.values(), key=lambda e: e["edge_id"])
        ],
        columns=EDGE_COLUMNS,
    )
    rejection_frame = pd.DataFrame(
        [
            {
                "reason": r.reason,
                "detail": r.detail,
                "record_id": r.record.record_id,
                "extractor": r.record.provenance.extractor,
                "chunk_id": r.record.provenance.chunk_id,
                "record": r.record.model_dump_json(),
            }
            for r in rejections
        ],
        columns=["reason", "detail", "record_id", "extractor", "chunk_id", "record"],
    )
    merges = pd.DataFrame(
        resolution.merges, columns=["node_id", "type", "scope", "surface", "canonical", "rule", "score"]
    )
    return GraphStore(
        nodes=nodes,
        edges=edge_frame,
        mentions=mentions,
        rejections=rejection_frame,
        merges=merges,
        communities=pd.DataFrame(columns=["community", "size", "summary", "top_nodes"]),
    )
