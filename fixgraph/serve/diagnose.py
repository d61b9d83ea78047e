"""Diagnose an error log: signatures -> knowledge-graph entities and documents -> ranked causes and fixes.

Two rankings of chunks are fused with reciprocal rank fusion (k=60, equal weights, fixed before any
log was scored):
- `search`: the served System on a query made of the log's error messages and errno messages;
- `signatures`: chunks holding the log's signatures, each match weighted by what it is (an errno entry
  of a page, the page of the call that failed, a path, an entity the graph links) times its rarity
  (idf over chunks), with a bonus where the page of the failing call states the reported errno.
For each of the best documents the answer cites where the cause is stated (the errno's entry, the
page's Cause and Problem nodes) and the fixes the graph attaches to it (Fix and Step nodes), every
one with its chunk and character span.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fixgraph.corpus.builder import BlockIndex
from fixgraph.corpus.chunk_index import ChunkIndex
from fixgraph.corpus.models import Block, Chunk, Document
from fixgraph.retrieval.base import Hit
from fixgraph.retrieval.fusion import rrf
from fixgraph.serve.graphview import GraphView
from fixgraph.serve.signatures import Signature, extract, query_of

RRF_K = 60
PAGE_NAME = re.compile(r"^(?P<name>[^.]+)\.\d\w*$")  # man pages: open.2, ls.1, proc.5
ERROR_SECTIONS = ("ERRORS", "DIAGNOSTICS", "EXIT STATUS", "RETURN VALUE")
# what one match of a signature is worth before idf
WEIGHTS = {"errno_entry": 2.0, "text": 1.0, "page_of": 3.0, "typed_span": 1.0, "path": 2.0, "basename": 1.0}
WEIGHTS |= {"entity": 1.0, "unit": 1.0}
NAMED = ("typed_span", "entity")  # two views of one fact (the page names the program): counted once
BOTH_BONUS = 1.5  # the page of the failing call states the errno it reported
# evidence that can put a chunk in the signature ranking by itself; the rest (a page naming the program,
# an entity mention, a word in the text) only adds to it: on its own it is too common to rank by
STRONG = ("errno_entry", "page_of", "path")
SPAN_KINDS = {"function": ("function", "cmd", "code", "app"), "command": ("cmd", "app", "code", "function")}

Search = Callable[[str, int], tuple[list[Hit], dict[str, float]]]


@dataclass
class Match:
    kind: str  # signature kind
    value: str
    how: str  # a WEIGHTS key
    weight: float


@dataclass
class Diagnosis:
    query: str
    signatures: list[Signature]
    links: list[dict[str, Any]]
    ranking: list[Hit]
    causes: list[dict[str, Any]]
    timings: dict[str, float] = field(default_factory=dict)

    def as_dict(self, top: int = 20) -> dict[str, Any]:
        return {
            "query": self.query,
            "signatures": [s.as_dict() for s in self.signatures],
            "links": self.links,
            "causes": self.causes,
            "ranking": [{"chunk_id": h.chunk_id, "score": round(h.score, 6)} for h in self.ranking[:top]],
            "timings": self.timings,
        }


class Diagnoser:
    def __init__(self, documents: Mapping[str, Document], chunks: Sequence[Chunk], graph: GraphView | None) -> None:
        self.documents = documents
        self.chunks = {c.id: c for c in chunks}
        self.graph = graph
        self.lower = {c.id: c.text.casefold() for c in chunks}
        self.index = ChunkIndex(chunks)
        self.pages: dict[str, list[str]] = defaultdict(list)  # `open` -> [open.2, open.3p]
        for doc_id in documents:
            match = PAGE_NAME.match(doc_id)
            if match:
                self.pages[match.group("name").casefold()].append(doc_id)
        self.spans: dict[tuple[str, str], list[tuple[str, int, int]]] = defaultdict(list)
        for doc in documents.values():
            for span in doc.spans:
                self.spans[(span.kind, span.text.casefold())].append((doc.id, span.start, span.end))

    def _containing(self, needle: str) -> set[str]:
        """Chunks whose text holds `needle` as a whole word (case-insensitive)."""
        key = needle.casefold()
        pattern = re.compile(rf"(?<![\w/]){re.escape(key)}(?![\w])")
        return {cid for cid, text in self.lower.items() if key in text and pattern.search(text)}

    def _span_chunks(self, kinds: Sequence[str], text: str) -> set[str]:
        found = set()
        for kind in kinds:
            for doc_id, start, _ in self.spans.get((kind, text.casefold()), []):
                chunk = self.index.chunk_at(doc_id, start)
                if chunk is not None:
                    found.add(chunk.id)
        return found

    def matches(self, signatures: Sequence[Signature], linked: Sequence[dict[str, Any]]) -> dict[str, list[Match]]:
        """chunk id -> the signature matches it holds, each weighted by kind and rarity."""
        groups: list[tuple[Signature | None, str, str, str, set[str]]] = []  # (sig, kind, value, how, chunks)
        for sig in signatures:
            if sig.kind == "errno":
                entries = self._span_chunks(("errno",), sig.value)
                groups.append((sig, sig.kind, sig.value, "errno_entry", entries))
                groups.append((sig, sig.kind, sig.value, "text", self._containing(sig.value) - entries))
            elif sig.kind in ("function", "command"):
                pages = self.pages.get(sig.value.casefold(), [])
                page_chunks = {c.id for doc in pages for c in self.index.chunks_of(doc)}
                groups.append((sig, sig.kind, sig.value, "page_of", page_chunks))
                groups.append(
                    (sig, sig.kind, sig.value, "typed_span", self._span_chunks(SPAN_KINDS[sig.kind], sig.value))
                )
            elif sig.kind == "path":
                exact = self._containing(sig.value)
                groups.append((sig, sig.kind, sig.value, "path", exact))
                base = sig.value.rstrip("/").rsplit("/", 1)[-1]
                if len(base) > 3 and base != sig.value:
                    groups.append((sig, sig.kind, sig.value, "basename", self._containing(base) - exact))
            elif sig.kind == "unit":
                stem = sig.value.rsplit(".", 1)[0]
                groups.append((sig, sig.kind, sig.value, "unit", self._containing(stem) if len(stem) > 2 else set()))
        if self.graph is not None:
            for node in linked:
                chunks = {m.chunk_id for m in self.graph.node_mentions.get(node["node_id"], [])}
                groups.append((None, "entity", node["name"], "entity", {str(c) for c in chunks}))
        total = max(len(self.chunks), 1)
        out: dict[str, list[Match]] = defaultdict(list)
        for _, kind, value, how, chunk_ids in groups:
            if not chunk_ids:
                continue
            idf = math.log((total + 1) / (len(chunk_ids) + 1))
            for cid in chunk_ids:
                found = out[cid]
                named = [m for m in found if m.how in NAMED and m.value.casefold() == value.casefold()]
                if how in NAMED and named:
                    named[0].weight = max(named[0].weight, WEIGHTS[how] * idf)
                    continue
                found.append(Match(kind, value, how, WEIGHTS[how] * idf))
        return out

    def signature_ranking(self, matches: Mapping[str, list[Match]], depth: int) -> list[Hit]:
        scored = []
        for cid, found in matches.items():
            if not any(m.how in STRONG for m in found):
                continue
            score = sum(m.weight for m in found)
            hows = {m.how for m in found}
            if "page_of" in hows and hows & {"errno_entry", "text"}:
                score *= BOTH_BONUS
            scored.append(Hit(cid, score))
        scored.sort(key=lambda h: (-h.score, h.chunk_id))
        return scored[:depth]

    def link(self, signatures: Sequence[Signature], log: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(graph nodes the log names, per-signature links to nodes and documents)."""
        names = [s.value for s in signatures if s.kind in ("function", "command", "path", "unit")]
        apps = re.findall(r"\b[A-Z][\w+.-]*(?: [A-Z][\w+.-]*){0,3}", log)  # capitalised runs: app names
        nodes = self.graph.link([*names, *apps]) if self.graph is not None else []
        links = []
        for sig in signatures:
            if sig.kind == "message":
                continue
            docs = list(self.pages.get(sig.value.casefold(), []))
            if sig.kind == "errno":
                docs += [d for d, _, _ in self.spans.get(("errno", sig.value.casefold()), [])]
            docs = list(dict.fromkeys(docs))
            linked = [n for n in nodes if n["matched"] in (sig.value, sig.text)]
            links.append(
                {
                    "kind": sig.kind,
                    "value": sig.value,
                    "nodes": [{k: n[k] for k in ("node_id", "type", "name")} for n in linked],
                    "documents": [{"doc_id": d, "title": self.documents[d].title} for d in docs[:10]],
                    "n_documents": len(docs),
                }
            )
        return nodes, links

    def diagnose(self, log: str, search: Search, depth: int = 100, max_causes: int = 5) -> Diagnosis:
        signatures = extract(log)
        query = query_of(signatures, log)
        hits, timings = search(query, depth)
        nodes, links = self.link(signatures, log)
        matches = self.matches(signatures, nodes)
        channels = {"search": hits, "signatures": self.signature_ranking(matches, depth)}
        fused = rrf(channels, RRF_K, depth)
        causes = self.causes(fused, matches, signatures, max_causes)
        return Diagnosis(query, signatures, links, fused, causes, timings)

    # -- causes and fixes -------------------------------------------------------------------------

    def cite(self, doc_id: str, start: int, end: int, label: str) -> dict[str, Any] | None:
        chunk = self.index.chunk_at(doc_id, start)
        if chunk is None:
            return None
        text = self.documents[doc_id].text[start:end]
        return {"chunk_id": chunk.id, "doc_id": doc_id, "start": start, "end": end, "text": text, "label": label}

    def errno_entries(self, doc: Document, value: str) -> list[dict[str, Any]]:
        """The term + definition of `value` in the page's error sections (else anywhere in the page)."""
        blocks = BlockIndex(doc)
        sections = {s.id: s for s in doc.sections}
        found = []
        for doc_id, start, _ in self.spans.get(("errno", value.casefold()), []):
            if doc_id != doc.id:
                continue
            head = blocks.block_at(start)
            if head is None or head.kind != "term":
                continue  # the errno is mentioned in prose, not the head of an entry
            unit: list[Block] = [b for b in doc.blocks if b.unit == head.unit and b.section == head.section]
            section = sections.get(head.section)
            in_errors = bool(
                section is not None and section.heading_path[:1] and section.heading_path[0] in ERROR_SECTIONS
            )
            label = f"{value} ({'errors' if in_errors else 'entry'})"
            citation = self.cite(doc.id, unit[0].start, unit[-1].end, label)
            if citation is not None:
                found.append((not in_errors, citation))
        found.sort(key=lambda pair: pair[0])
        return [c for _, c in found[:2]]

    def graph_citations(self, doc_id: str, types: Sequence[str], limit: int) -> list[dict[str, Any]]:
        if self.graph is None:
            return []
        out: list[dict[str, Any]] = []
        for nid in self.graph.doc_nodes_of_types(doc_id, types):
            for mention in self.graph.mentions_in_doc(nid, doc_id)[:1]:
                citation = self.cite(doc_id, mention["start"], mention["end"], self.graph.nodes[nid]["type"])
                if citation is not None:
                    out.append({**citation, "node_id": nid})
        out.sort(key=lambda c: c["start"])
        return out[:limit]

    def fixes(self, doc_id: str, limit: int = 4) -> list[dict[str, Any]]:
        """Fix nodes of the page's problems and causes (fixed_by), else its task steps, as citations."""
        if self.graph is None:
            return []
        fixes = self.graph_citations(doc_id, ("Fix",), limit)
        return fixes or self.graph_citations(doc_id, ("Step",), limit)

    def causes(
        self, ranking: Sequence[Hit], matches: Mapping[str, list[Match]], signatures: Sequence[Signature], limit: int
    ) -> list[dict[str, Any]]:
        errnos = [s.value for s in signatures if s.kind == "errno"]
        seen: set[str] = set()
        out: list[dict[str, Any]] = []
        for hit in ranking:
            chunk = self.chunks.get(hit.chunk_id)
            if chunk is None or chunk.doc_id in seen:
                continue
            seen.add(chunk.doc_id)
            doc = self.documents[chunk.doc_id]
            cause = [c for e in errnos for c in self.errno_entries(doc, e)]
            cause += self.graph_citations(doc.id, ("Problem", "Cause"), 3)
            passage = self.cite(doc.id, chunk.start, chunk.end, "passage")
            out.append(
                {
                    "rank": len(out) + 1,
                    "doc_id": doc.id,
                    "title": doc.title,
                    "url": doc.url,
                    "chunk_id": chunk.id,
                    "section": " > ".join(chunk.heading_path),
                    "score": round(hit.score, 6),
                    "matched": [
                        {"kind": m.kind, "value": m.value, "how": m.how, "weight": round(m.weight, 3)}
                        for m in matches.get(chunk.id, [])
                    ],
                    "cause": cause,
                    "fixes": self.fixes(doc.id),
                    "passage": passage,
                }
            )
            if len(out) >= limit:
                break
        return out
