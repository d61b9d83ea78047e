"""The knowledge graph as the API shows it: a node's neighbourhood, the evidence subgraph of a set of
chunks (an answer's citations), and name lookups for linking log signatures to entities.

Every node and edge carries its provenance: the mentions (chunk, document, character span, evidence
text, extractor) it was extracted from, so the dashboard can open the very sentence behind an edge.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fixgraph.kg.ontology import alias_key
from fixgraph.kg.store import EDGE_COLUMNS, MENTION_COLUMNS, NODE_COLUMNS, GraphStore

# global entity types a log can name; keys and UI labels ("Up", "C", "Open") are too ambiguous to link
LINKABLE = ("App", "Command", "File")
CASE_SENSITIVE = ("App",)  # "Files", "Disks", "Settings": proper names, not the words


def _mention(row: Any) -> dict[str, Any]:
    return {
        "chunk_id": str(row.chunk_id),
        "doc_id": str(row.doc_id),
        "start": int(row.start),
        "end": int(row.end),
        "evidence": str(row.evidence),
        "extractor": str(row.extractor),
        "basis": str(row.basis),
    }


@dataclass
class GraphView:
    store: GraphStore

    def __post_init__(self) -> None:
        nodes = self.store.nodes
        self.nodes: dict[str, dict[str, Any]] = {
            str(r.node_id): {"node_id": str(r.node_id), "type": str(r.type), "name": str(r.name), "scope": str(r.scope)}
            for r in nodes.itertuples(index=False)
        }
        mentions = self.store.mentions
        self.node_mentions: dict[str, list[Any]] = defaultdict(list)
        self.edge_mentions: dict[str, list[Any]] = defaultdict(list)
        self.chunk_nodes: dict[str, set[str]] = defaultdict(set)
        self.chunk_edges: dict[str, set[str]] = defaultdict(set)
        self.doc_nodes: dict[str, set[str]] = defaultdict(set)
        for row in mentions.itertuples(index=False):
            if row.role == "entity":
                self.node_mentions[str(row.node_id)].append(row)
                self.chunk_nodes[str(row.chunk_id)].add(str(row.node_id))
                self.doc_nodes[str(row.doc_id)].add(str(row.node_id))
            else:
                self.edge_mentions[str(row.edge_id)].append(row)
                self.chunk_edges[str(row.chunk_id)].add(str(row.edge_id))
        self.edges: dict[str, dict[str, Any]] = {
            str(r.edge_id): {
                "edge_id": str(r.edge_id),
                "source": str(r.source),
                "target": str(r.target),
                "relation": str(r.relation),
                "weight": float(str(r.weight)),
            }
            for r in self.store.edges.itertuples(index=False)
        }
        self.incident: dict[str, list[str]] = defaultdict(list)
        for eid, edge in self.edges.items():
            self.incident[edge["source"]].append(eid)
            self.incident[edge["target"]].append(eid)
        self.by_name: dict[str, list[str]] = defaultdict(list)  # linking keys of linkable nodes
        for nid, node in self.nodes.items():
            if node["type"] in LINKABLE:
                key = node["name"] if node["type"] in CASE_SENSITIVE else alias_key(node["name"])
                self.by_name[key].append(nid)

    @classmethod
    def load(cls, folder: Path) -> GraphView:
        return cls(GraphStore.read(folder))

    @classmethod
    def empty(cls) -> GraphView:
        frame = pd.DataFrame
        return cls(GraphStore(frame(columns=NODE_COLUMNS), frame(columns=EDGE_COLUMNS), frame(columns=MENTION_COLUMNS)))

    def node(self, node_id: str, max_mentions: int = 20) -> dict[str, Any] | None:
        node = self.nodes.get(node_id)
        if node is None:
            return None
        mentions = self.node_mentions.get(node_id, [])
        return {**node, "mentions": [_mention(m) for m in mentions[:max_mentions]], "n_mentions": len(mentions)}

    def edge(self, edge_id: str, max_mentions: int = 5) -> dict[str, Any]:
        mentions = self.edge_mentions.get(edge_id, [])
        return {**self.edges[edge_id], "mentions": [_mention(m) for m in mentions[:max_mentions]]}

    def neighbourhood(self, node_id: str, limit: int = 50) -> dict[str, Any] | None:
        """The node, its incident edges (heaviest first) and the nodes at their other ends."""
        centre = self.node(node_id)
        if centre is None:
            return None
        edge_ids = sorted(self.incident.get(node_id, []), key=lambda e: (-self.edges[e]["weight"], e))
        shown = edge_ids[:limit]
        others = {self.edges[e]["source"] for e in shown} | {self.edges[e]["target"] for e in shown}
        others.discard(node_id)
        return {
            "node": centre,
            "edges": [self.edge(e) for e in shown],
            "neighbours": [self.node(n, max_mentions=3) for n in sorted(others)],
            "truncated": max(len(edge_ids) - limit, 0),
        }

    def evidence(self, chunk_ids: Sequence[str], limit: int = 60) -> dict[str, Any]:
        """The subgraph stated in these chunks: nodes mentioned there and edges extracted there."""
        wanted = list(dict.fromkeys(chunk_ids))
        node_ids: set[str] = set()
        edge_ids: set[str] = set()
        for cid in wanted:
            node_ids |= self.chunk_nodes.get(cid, set())
            edge_ids |= self.chunk_edges.get(cid, set())
        for eid in edge_ids:
            node_ids |= {self.edges[eid]["source"], self.edges[eid]["target"]}
        degree: dict[str, int] = defaultdict(int)
        for eid in edge_ids:
            degree[self.edges[eid]["source"]] += 1
            degree[self.edges[eid]["target"]] += 1
        keep = sorted(node_ids, key=lambda n: (-degree[n], n))[:limit]
        kept = set(keep)
        in_chunks = set(wanted)
        return {
            "chunks": wanted,
            "nodes": [
                {
                    **self.nodes[n],
                    "mentions": [_mention(m) for m in self.node_mentions.get(n, []) if m.chunk_id in in_chunks][:3],
                }
                for n in keep
            ],
            "edges": [
                {
                    **self.edges[e],
                    "mentions": [_mention(m) for m in self.edge_mentions.get(e, []) if m.chunk_id in in_chunks][:3],
                }
                for e in sorted(edge_ids)
                if self.edges[e]["source"] in kept and self.edges[e]["target"] in kept
            ],
            "truncated": max(len(node_ids) - limit, 0),
        }

    def link(self, phrases: Iterable[str]) -> list[dict[str, Any]]:
        """Linkable nodes named by any of `phrases` (exact name for apps and UI elements, else alias key)."""
        hits: dict[str, dict[str, Any]] = {}
        for phrase in phrases:
            for key in {phrase, alias_key(phrase)}:
                for nid in self.by_name.get(key, []):
                    node = self.nodes[nid]
                    exact = node["type"] not in CASE_SENSITIVE or key == node["name"]
                    if exact:
                        hits.setdefault(nid, {**node, "matched": phrase})
        return list(hits.values())

    def doc_nodes_of_types(self, doc_id: str, types: Sequence[str]) -> list[str]:
        return sorted(n for n in self.doc_nodes.get(doc_id, set()) if self.nodes[n]["type"] in types)

    def mentions_in_doc(self, node_id: str, doc_id: str) -> list[dict[str, Any]]:
        return [_mention(m) for m in self.node_mentions.get(node_id, []) if m.doc_id == doc_id]

    def targets(self, node_id: str, relation: str) -> list[str]:
        return [
            self.edges[e]["target"]
            for e in self.incident.get(node_id, [])
            if self.edges[e]["relation"] == relation and self.edges[e]["source"] == node_id
        ]
