"""Helpers for knowledge-graph tests: the fixture corpus parsed and chunked, and record builders."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from fixgraph.corpus.models import Chunk, Document
from fixgraph.kg.extract import GraphRecord, Provenance
from tests.conftest import FIXTURES


def fixture_corpus(tmp_path: Path) -> tuple[dict[str, Document], list[Chunk]]:
    from fixgraph.config import compose
    from fixgraph.pipeline import stages

    pages = tmp_path / "pages"
    if not pages.exists():
        shutil.copytree(FIXTURES / "mallard", pages)
    cfg = compose(
        [
            "corpus=mallard_folder",
            f"corpus.snapshot_dir={pages}",
            "embedder=hashing",
            f"paths.artifacts={tmp_path / 'artifacts'}",
        ]
    )
    stages.chunk(cfg)
    return {d.id: d for d in stages.load_documents(cfg)}, stages.load_chunks(cfg)


def chunk(text: str, doc_id: str = "doc", start: int = 0, title: str = "Title") -> Chunk:
    return Chunk(
        id=f"{doc_id}#_-0",
        doc_id=doc_id,
        start=start,
        end=start + len(text),
        text=text,
        title=title,
        heading_path=[],
        section="",
        n_tokens=len(text.split()),
        content_hash="h",
    )


def record(
    subject: str, subject_type: str, c: Chunk, evidence: str | None = None, extractor: str = "llm", **kw: Any
) -> GraphRecord:
    """A record stated in chunk `c`; its span is the evidence's position when found, else the chunk's."""
    evidence = subject if evidence is None else evidence
    found = c.text.find(evidence)
    start, end = (c.start + found, c.start + found + len(evidence)) if found >= 0 else (c.start, c.end)
    prov = Provenance(chunk_id=c.id, doc_id=c.doc_id, start=start, end=end, extractor=extractor)
    return GraphRecord(subject=subject, subject_type=subject_type, evidence=evidence, provenance=prov, **kw)
