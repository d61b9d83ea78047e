"""The manifest of a corpus snapshot, and the accounting that says what became of every input file.

`corpus_hash` is the hash of the snapshot's files (relative paths + contents): any added, removed,
renamed or edited file changes it. Every file of the snapshot is accounted for: it produced
documents, or it was skipped / ignored with a reason in the problem report, or it is a resource the
pages use (XInclude targets, alias lists, provenance). Files nobody claimed are reported too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from fixgraph.corpus.files import Problem
from fixgraph.corpus.models import Document

MANIFEST_VERSION = 2


def account_files(
    files: Mapping[str, str],
    documents: Sequence[Document],
    problems: Sequence[Problem],
    resources: Mapping[str, str],
) -> tuple[dict[str, int], list[Problem]]:
    """Classify each snapshot file; files no connector claimed come back as `unaccounted` problems."""
    # a record path like "faq.jsonl#row3" belongs to the file "faq.jsonl"
    with_docs = {d.path.split("#", 1)[0] for d in documents}
    with_problems = {p.path.split("#", 1)[0] for p in problems}
    claimed = with_docs | with_problems | set(resources)
    unaccounted = [
        Problem(path, "no connector read this file", "unaccounted", "ignored")
        for path in sorted(files)
        if path not in claimed
    ]
    counts = {
        "files": len(files),
        "files_with_documents": len(with_docs & set(files)),
        "files_with_problems_only": len((with_problems - with_docs) & set(files)),
        "resource_files": len(set(resources) & set(files)),
        "unaccounted_files": len(unaccounted),
    }
    return counts, unaccounted


def problem_counts(problems: Sequence[Problem]) -> dict[str, dict[str, int]]:
    """{action: {kind: count}}: e.g. {"skipped": {"malformed": 1}, "warning": {"missing_link": 3}}."""
    out: dict[str, Counter[str]] = {}
    for problem in problems:
        out.setdefault(problem.action, Counter())[problem.kind] += 1
    return {action: dict(sorted(kinds.items())) for action, kinds in sorted(out.items())}


def document_counts(docs: Sequence[Document]) -> dict[str, int]:
    return {
        "documents": len(docs),
        "sections": sum(len(d.sections) for d in docs),
        "blocks": sum(len(d.blocks) for d in docs),
        "links": sum(len(d.links) for d in docs),
        "inline_spans": sum(len(d.spans) for d in docs),
        "characters": sum(len(d.text) for d in docs),
        # whitespace tokens: the chunk stage's manifest counts tokens of the embedder's tokenizer
        "words": sum(len(d.text.split()) for d in docs),
    }


def build_manifest(
    *,
    corpus: str,
    kind: str,
    source: Mapping[str, Any],
    snapshot_hash: str,
    config_hash: str,
    files: Mapping[str, str],
    parsed: int,
    documents: Sequence[Document],
    problems: Sequence[Problem],
    file_counts: Mapping[str, int],
    dedup: Mapping[str, Any],
    links: Mapping[str, Any],
    documents_hash: str,
) -> dict[str, Any]:
    by_action = problem_counts(problems)
    return {
        "manifest_version": MANIFEST_VERSION,
        "corpus": corpus,
        "kind": kind,
        "source": dict(source),
        "corpus_hash": snapshot_hash,
        "config_hash": config_hash,
        "documents_hash": documents_hash,
        "files": dict(files),
        "counts": {
            **document_counts(documents),
            "parsed_documents": parsed,
            "absorbed_duplicates": int(dedup.get("absorbed", 0)),
            "skipped": sum(by_action.get("skipped", {}).values()),
            "ignored": sum(by_action.get("ignored", {}).values()),
            "warnings": sum(by_action.get("warning", {}).values()),
            **file_counts,
        },
        "problems": by_action,
        "dedup": dict(dedup),
        "links": dict(links),
    }
