"""The link graph artifact: one row per link, document -> document, with anchor text and link sentence.

Targets are resolved through the corpus's aliases (man page symlinks, redirected URLs) and the
near-duplicate redirects, then classified: resolved, self (a link inside the page), external (a URL or
another help set, `help:gnome-help/...`) or missing (a page the corpus does not have; reported per
source file). Links whose sentence carries a condition ("If the light stays amber, see ...") are
flagged `conditional` with the condition's text: they are the raw material of multi-hop questions.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fixgraph.corpus.files import Problem
from fixgraph.corpus.models import Document, Link
from fixgraph.io import atomic_path

# Subordinators that open a condition in help text (English); matched on word boundaries.
CONDITION = re.compile(r"\b(if|unless|when|whenever|in case|should you|otherwise)\b", re.IGNORECASE)
CLAUSE_END = re.compile(r"[,;:]")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # help:, http:, ghelp:, man:

COLUMNS = [
    ("source_doc", pa.string()),
    ("source_section", pa.string()),
    ("target_doc", pa.string()),
    ("target_section", pa.string()),
    ("resolved_doc", pa.string()),
    ("status", pa.string()),
    ("link_type", pa.string()),
    ("anchor_text", pa.string()),
    ("sentence", pa.string()),
    ("conditional", pa.bool_()),
    ("condition", pa.string()),
    ("start", pa.int64()),
    ("end", pa.int64()),
    ("href", pa.string()),
]
SCHEMA = pa.schema(COLUMNS)


def condition_of(sentence: str, anchor: str) -> str:
    """The conditional clause of a link's sentence, or "" when the sentence states no condition.

    Before the anchor: from the subordinator to the first comma (or to the anchor). After it: from the
    subordinator to the end of the sentence ("Reset the hub if nothing else works.").
    """
    if not sentence:
        return ""
    match = CONDITION.search(sentence)
    if match is None:
        return ""
    position = sentence.find(anchor) if anchor else -1
    if position < 0 or match.start() < position:
        limit = position if position > match.start() else len(sentence)
        end = CLAUSE_END.search(sentence, match.start(), limit)
        clause = sentence[match.start() : end.start() if end else limit]
    else:
        clause = sentence[match.start() :]
    return clause.strip().rstrip(".!?,;:( ").strip()


def resolve_target(target: str, ids: set[str], aliases: Mapping[str, str], redirects: Mapping[str, str]) -> str:
    """Follow aliases and near-duplicate redirects (a few hops at most) to a document id, or ""."""
    for _ in range(5):
        if target in ids:
            return target
        target = aliases.get(target) or redirects.get(target) or ""
        if not target:
            return ""
    return ""


class _Sections:
    def __init__(self, doc: Document) -> None:
        ordered = sorted(doc.sections, key=lambda s: (s.start, -s.end))
        self.sections = ordered
        self.starts = [s.start for s in ordered]

    def at(self, offset: int | None) -> str:
        if offset is None:
            return ""
        i = bisect.bisect_right(self.starts, offset)
        for section in reversed(self.sections[:i]):  # the innermost section holding the offset
            if section.start <= offset < max(section.end, section.start + 1):
                return section.id
        return ""


def link_row(doc: Document, link: Link, section: str, resolved: str, status: str) -> dict[str, Any]:
    condition = condition_of(link.sentence, link.anchor_text)
    return {
        "source_doc": doc.id,
        "source_section": section,
        "target_doc": link.target_doc,
        "target_section": link.target_section,
        "resolved_doc": resolved,
        "status": status,
        "link_type": link.link_type,
        "anchor_text": link.anchor_text,
        "sentence": link.sentence,
        "conditional": bool(condition),
        "condition": condition,
        "start": link.start,
        "end": link.end,
        "href": link.href,
    }


def build_link_graph(
    docs: Sequence[Document],
    aliases: Mapping[str, str] | None = None,
    redirects: Mapping[str, str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any], list[Problem]]:
    """(rows, stats, problems): every link of every document, resolved and classified."""
    aliases, redirects = aliases or {}, redirects or {}
    ids = {d.id for d in docs}
    rows: list[dict[str, Any]] = []
    missing_by_doc: dict[str, set[str]] = defaultdict(set)
    for doc in docs:
        sections = _Sections(doc)
        for link in doc.links:
            resolved = resolve_target(link.target_doc, ids, aliases, redirects) if link.target_doc else ""
            if not link.target_doc or (not resolved and SCHEME.match(link.target_doc)):
                status = "external"
            elif not resolved:
                status = "missing"
                missing_by_doc[doc.path or doc.id].add(link.target_doc)
            elif resolved == doc.id:
                status = "self"
            else:
                status = "resolved"
            rows.append(link_row(doc, link, sections.at(link.start), resolved, status))
    problems = [
        Problem(path, f"links to {len(t)} missing pages: {', '.join(sorted(t)[:10])}", "missing_link", "warning")
        for path, t in sorted(missing_by_doc.items())
    ]
    return rows, link_stats(rows, ids), problems


def link_stats(rows: Sequence[dict[str, Any]], ids: set[str]) -> dict[str, Any]:
    edges = {(r["source_doc"], r["resolved_doc"]) for r in rows if r["status"] == "resolved"}
    linked_to = {target for _, target in edges}
    return {
        "links": len(rows),
        "by_status": dict(sorted(Counter(r["status"] for r in rows).items())),
        "by_type": dict(sorted(Counter(r["link_type"] for r in rows).items())),
        "conditional": sum(1 for r in rows if r["conditional"]),
        "doc_edges": len(edges),
        "missing_targets": len({r["target_doc"] for r in rows if r["status"] == "missing"}),
        "documents_without_inbound_links": len(ids - linked_to),
    }


def write_link_graph(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    table = pa.Table.from_pylist(list(rows), schema=SCHEMA)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_link_graph(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()
