"""Training groups for the cross-encoder, derived from the corpus alone (never from benchmark questions).

Each page gives queries that a user could have typed for its chunks: the page title, the page summary
(Mallard info/desc) and each section heading. A group is one such query with one positive chunk (of
that page, or of that section for a heading) and hard negatives: BM25's best chunks for the query
from OTHER pages, i.e. the lexically close passages a reranker must learn to push down.
"""

from __future__ import annotations

import random
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fixgraph.corpus.models import Chunk, Document

QUERY_KINDS = ("title", "summary", "heading")


@dataclass(frozen=True)
class Group:
    query: str
    query_kind: str  # title | summary | heading
    positive: str  # chunk id
    negatives: tuple[str, ...]  # chunk ids
    # distillation (training/distill.py): the teacher's score for (positive, *negatives); empty otherwise
    teacher: tuple[float, ...] = ()

    def to_json(self) -> dict[str, Any]:
        row = {**asdict(self), "negatives": list(self.negatives), "teacher": list(self.teacher)}
        if not self.teacher:
            del row["teacher"]  # hard-label groups files stay byte-identical to before distillation existed
        return row

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Group:
        teacher = tuple(float(s) for s in row.get("teacher", ()))
        return cls(row["query"], row["query_kind"], row["positive"], tuple(row["negatives"]), teacher)


def corpus_queries(
    documents: Sequence[Document], chunks: Sequence[Chunk], kinds: Sequence[str]
) -> list[tuple[str, str, str]]:
    """(query, kind, positive chunk id) for every page title / summary / section heading."""
    unknown = set(kinds) - set(QUERY_KINDS)
    if unknown:
        raise ValueError(f"trainer: unknown query kinds {sorted(unknown)}; valid: {', '.join(QUERY_KINDS)}")
    by_doc: dict[str, list[Chunk]] = defaultdict(list)
    for c in chunks:
        by_doc[c.doc_id].append(c)
    out: list[tuple[str, str, str]] = []
    for doc in documents:
        doc_chunks = by_doc.get(doc.id, [])
        if not doc_chunks:
            continue
        for c in doc_chunks:
            if "title" in kinds and doc.title.strip():
                out.append((doc.title.strip(), "title", c.id))
            if "summary" in kinds and doc.summary.strip():
                out.append((doc.summary.strip(), "summary", c.id))
            if "heading" in kinds and c.heading_path:
                out.append((str(c.heading_path[-1]).strip(), "heading", c.id))
    return out


def build_groups(
    documents: Sequence[Document],
    chunks: Sequence[Chunk],
    kinds: Sequence[str],
    negatives: int,
    negative_pool: int,
    max_groups: int,
    seed: int,
    bm25: dict[str, Any],
) -> list[Group]:
    from fixgraph.retrieval.bm25 import BM25Retriever

    rng = random.Random(seed)
    triples = corpus_queries(documents, chunks, kinds)
    rng.shuffle(triples)
    triples = triples[:max_groups] if max_groups > 0 else triples
    doc_of = {c.id: c.doc_id for c in chunks}
    retriever = BM25Retriever(**{**bm25, "backend": "bm25s"})
    with tempfile.TemporaryDirectory() as tmp:
        retriever.build(chunks, Path(tmp))
    groups = []
    for query, kind, positive in triples:
        pool = [
            h.chunk_id for h in retriever.search(query, negative_pool + 50) if doc_of[h.chunk_id] != doc_of[positive]
        ]
        pool = pool[:negative_pool]
        if len(pool) < negatives:
            continue
        groups.append(Group(query, kind, positive, tuple(rng.sample(pool, negatives))))
    return groups
