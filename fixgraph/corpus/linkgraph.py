"""The link graph artifact: one row per link, document -> document, with anchor text and link sentence.

Targets are resolved through the corpus's aliases (man page symlinks, redirected URLs) and the
near-duplicate redirects, then classified:
- resolved: the page the link names; self: a link inside its own page;
- redirected: reached through an alias or a near-duplicate redirect (the alias is kept on the target);
- missing_anchor: the page exists but has no `#section` of that id;
- broken: the source says the target is gone (HTTP 404/410); disallowed: robots.txt forbade fetching it;
- external: a URL or another help set (`help:gnome-help/...`); missing: a page the corpus does not have.
Missing pages and anchors are reported per source file. Links whose sentence carries a condition ("If
the light stays amber, see ...") are flagged `conditional` with the condition's text: they are the raw
material of multi-hop questions. A subordinator that opens an embedded question ("Learn what to do if
your Mac won't start", a title quoted as the anchor) is not a condition.
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
# "what to do if", "how to ... when", "find out whether": the subordinator opens a question, not a condition
EMBEDDED_QUESTION = re.compile(r"\b(what|how|which|where|who|why|whether)\b(\s+\w+){0,4}\s*$", re.IGNORECASE)
RESOLVING = ("resolved", "self", "redirected", "missing_anchor")  # statuses that reach a document
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
    subordinator to the end of the sentence ("Reset the hub if nothing else works."). A subordinator
    inside the anchor text, or one that follows "what to do", "how to" and the like, is part of a quoted
    title or question and opens no condition.
    """
    if not sentence:
        return ""
    position = sentence.find(anchor) if anchor else -1
    for match in CONDITION.finditer(sentence):
        if position >= 0 and position <= match.start() < position + len(anchor):
            continue  # "see <What to do if the screen is blank>": the link's title, not a condition
        if EMBEDDED_QUESTION.search(sentence[: match.start()]):
            continue  # "Learn what to do if ..."
        if position < 0 or match.start() < position:
            limit = position if position > match.start() else len(sentence)
            end = CLAUSE_END.search(sentence, match.start(), limit)
            clause = sentence[match.start() : end.start() if end else limit]
        else:
            clause = sentence[match.start() :]
        return clause.strip().rstrip(".!?,;:( ").strip()
    return ""


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


def has_anchor(doc: Document, anchor: str) -> bool:
    return any(s.id == anchor for s in doc.sections) or anchor in doc.anchors


def classify(
    doc: Document,
    link: Link,
    by_id: Mapping[str, Document],
    aliases: Mapping[str, str],
    redirects: Mapping[str, str],
    unavailable: Mapping[str, str],
) -> tuple[str, str]:
    """(resolved document id or "", status) of one link; statuses in the module docstring."""
    if not link.target_doc:
        return "", "external"
    resolved = resolve_target(link.target_doc, set(by_id), aliases, redirects)
    if not resolved:
        if link.target_doc in unavailable:
            return "", unavailable[link.target_doc]
        return "", "external" if SCHEME.match(link.target_doc) else "missing"
    if link.target_section and not has_anchor(by_id[resolved], link.target_section):
        return resolved, "missing_anchor"
    if resolved == doc.id:
        return resolved, "self"
    return resolved, "redirected" if resolved != link.target_doc else "resolved"


def build_link_graph(
    docs: Sequence[Document],
    aliases: Mapping[str, str] | None = None,
    redirects: Mapping[str, str] | None = None,
    unavailable: Mapping[str, str] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any], list[Problem]]:
    """(rows, stats, problems): every link of every document, resolved and classified."""
    aliases, redirects, unavailable = aliases or {}, redirects or {}, unavailable or {}
    by_id = {d.id: d for d in docs}
    rows: list[dict[str, Any]] = []
    missing_by_doc: dict[str, set[str]] = defaultdict(set)
    anchors_by_doc: dict[str, set[str]] = defaultdict(set)
    for doc in docs:
        sections = _Sections(doc)
        for link in doc.links:
            resolved, status = classify(doc, link, by_id, aliases, redirects, unavailable)
            if status in ("missing", "broken", "disallowed"):
                missing_by_doc[doc.path or doc.id].add(
                    f"{link.target_doc} ({status})" if status != "missing" else link.target_doc
                )
            elif status == "missing_anchor":
                anchors_by_doc[doc.path or doc.id].add(f"{resolved}#{link.target_section}")
            rows.append(link_row(doc, link, sections.at(link.start), resolved, status))
    problems = [
        Problem(path, f"links to {len(t)} missing pages: {', '.join(sorted(t)[:10])}", "missing_link", "warning")
        for path, t in sorted(missing_by_doc.items())
    ]
    problems += [
        Problem(path, f"links to {len(t)} missing anchors: {', '.join(sorted(t)[:10])}", "missing_anchor", "warning")
        for path, t in sorted(anchors_by_doc.items())
    ]
    return rows, link_stats(rows, set(by_id)), problems


def link_stats(rows: Sequence[dict[str, Any]], ids: set[str]) -> dict[str, Any]:
    edges = {(r["source_doc"], r["resolved_doc"]) for r in rows if r["status"] in RESOLVING and r["status"] != "self"}
    linked_to = {target for _, target in edges}
    return {
        "links": len(rows),
        "by_status": dict(sorted(Counter(r["status"] for r in rows).items())),
        "by_type": dict(sorted(Counter(r["link_type"] for r in rows).items())),
        "conditional": sum(1 for r in rows if r["conditional"]),
        "doc_edges": len(edges),
        "missing_targets": len({r["target_doc"] for r in rows if r["status"] in ("missing", "broken", "disallowed")}),
        "documents_without_inbound_links": len(ids - linked_to),
    }


def write_link_graph(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    table = pa.Table.from_pylist(list(rows), schema=SCHEMA)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_link_graph(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()
