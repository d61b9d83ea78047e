"""Article-link expansion: follow the corpus's typed links from the first stage's top pages, weighting
each link by how well its context matches the question.

Two-hop ("bridge") questions describe a situation on page A whose answer is on page C that A links to
("If the icon is missing, see Show the accessibility menu"); C's topic is often not named. The first
stage usually ranks A high, so the pages A links to are the candidates for C, and the link's own words
say when to follow it. For the `seed_pages` best pages of the first stage, every resolved link A -> C
of an allowed type gets a match score

    match(l) = cos(question, context(l)) x type_weight(l)

where context(l) is, for a conditional link ("If X, see Y"), the condition X, and otherwise the
sentence holding the link (else its anchor text, else C's title). Each chunk c of a page C then scores

    score(c) = first_stage(c) + weight x max_{l: A -> C, A a seed page} match(l)

so a page reached by a well-matching link moves up, chunks keep their order within a page, and pages
no seed page links to keep their first-stage score. With `backward` > 0, links A -> C *into* a seed page
C count too: the chunk of A that holds the link (inline links carry its offset) gains backward x
match(l), for questions whose gold includes A's "If X, see C" as well as C. Chunks of reached pages
(and linking chunks) that the first stage did not return score from the floor of its list ("no better
than the worst it returned", as in weighted fusion). Link contexts are embedded once at load, through
the shared embedding cache.

On the GNOME Help dev questions with dense_mpnet as the first stage, this is what moves bridge
questions (docs/results/quality.md); PPR over the same link graph (`article_links`) does not.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fixgraph.corpus.chunk_index import ChunkIndex
from fixgraph.corpus.models import Chunk
from fixgraph.embedders.encoders import Embedder, EmbeddingCache, build_embedder
from fixgraph.retrieval.base import (
    RETRIEVERS,
    Hit,
    RecentTraces,
    build_first_stage,
    build_retriever,
    load_first_stage,
)

CONTEXTS = ("condition", "sentence", "anchor")


def link_context(row: Mapping[Any, Any], target_title: str, context: str) -> str:
    """The words that say when to follow a link (see the module docstring), by `context` preference."""
    condition = str(row.get("condition") or "") if context == "condition" else ""
    sentence = str(row.get("sentence") or "") if context in ("condition", "sentence") else ""
    return condition or sentence or str(row.get("anchor_text") or "") or target_title


@RETRIEVERS.register("link_expansion")
class LinkExpansionRetriever:
    def __init__(
        self,
        name: str = "link_expansion",
        first_stage: Any = None,
        embedder: Any = None,
        links: str = "",
        documents: str = "",
        cache_dir: str | None = None,
        seed_pages: int = 3,
        weight: float = 0.1,
        link_types: Mapping[str, float] | None = None,
        context: str = "condition",
        candidates: int = 100,
        depth: int = 100,
        backward: float = 0.0,
    ) -> None:
        if first_stage is None:
            raise ValueError(f"retriever {name}: needs a `first_stage` (the retriever whose top pages seed links)")
        if embedder is None:
            raise ValueError(f"retriever {name}: needs an `embedder` to match link contexts with the question")
        if context not in CONTEXTS:
            raise ValueError(f"retriever {name}: unknown context {context!r}; valid: {', '.join(CONTEXTS)}")
        if seed_pages < 1 or candidates < 1:
            raise ValueError(f"retriever {name}: seed_pages and candidates must be >= 1")
        if weight < 0 or backward < 0:
            raise ValueError(f"retriever {name}: weight and backward must be >= 0")
        self.name = name
        self.first_stage = build_retriever(first_stage)
        self.embedder: Embedder = build_embedder(embedder)
        self.links_path, self.documents_path = Path(links), Path(documents)
        self.cache = EmbeddingCache(Path(cache_dir)) if cache_dir else None
        self.seed_pages, self.weight, self.context = seed_pages, float(weight), context
        self.link_types = {str(k): float(v) for k, v in (link_types or {"inline": 1.0, "seealso": 1.0}).items()}
        self.candidates, self.depth, self.backward = candidates, depth, float(backward)
        self.doc_of: dict[str, str] = {}
        self.chunks_of: dict[str, list[str]] = {}
        self.out_links: dict[str, list[tuple[str, int, float]]] = {}  # page -> (target, context row, type weight)
        self.in_links: dict[str, list[tuple[str, int, float]]] = {}  # page -> (source chunk, context row, type weight)
        self.into: dict[str, list[tuple[int, float]]] = {}  # page -> (context row, type weight) of every link into it
        self.context_vectors = np.zeros((0, 0), dtype=np.float32)
        self.traces = RecentTraces()
        self.last_timings: dict[str, float] = {}

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        build_first_stage(self.first_stage, chunks, workdir)

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        load_first_stage(self.first_stage, chunks, workdir)
        for path, step in ((self.links_path, "ingest"), (self.documents_path, "ingest")):
            if not path.exists():
                raise FileNotFoundError(f"{path} not found; run `fixgraph {step}` first")
        from fixgraph.corpus.store import read_documents

        titles = {d.id: d.title for d in read_documents(self.documents_path)}
        self.doc_of = {c.id: c.doc_id for c in chunks}
        self.chunks_of = defaultdict(list)
        for c in chunks:
            self.chunks_of[c.doc_id].append(c.id)
        frame = pd.read_parquet(self.links_path)
        frame = frame[(frame["status"] == "resolved") & (frame["source_doc"] != frame["resolved_doc"])]
        texts: list[str] = []
        self.out_links, self.in_links, self.into = defaultdict(list), defaultdict(list), defaultdict(list)
        index = ChunkIndex(chunks)
        for row in frame.to_dict("records"):
            type_weight = self.link_types.get(str(row["link_type"]), 0.0)
            target = str(row["resolved_doc"])
            if type_weight <= 0 or target not in self.chunks_of:
                continue
            self.out_links[str(row["source_doc"])].append((target, len(texts), type_weight))
            self.into[target].append((len(texts), type_weight))
            start = row.get("start")
            holder = None if start is None or pd.isna(start) else index.chunk_at(str(row["source_doc"]), int(start))
            if holder is not None:
                self.in_links[target].append((holder.id, len(texts), type_weight))
            texts.append(link_context(row, titles.get(target, target), self.context))
        unique = sorted(set(texts))
        if unique:
            vectors = self.cache.embed(self.embedder, unique) if self.cache else self.embedder.embed_documents(unique)
            position = {t: i for i, t in enumerate(unique)}
            self.context_vectors = np.asarray(vectors, dtype=np.float32)[[position[t] for t in texts]]

    def search(self, query: str, k: int) -> list[Hit]:
        return self.expand(query, k)[0]

    def expand(self, query: str, k: int) -> tuple[list[Hit], dict[str, float]]:
        """The top k hits, and per page reached by a link out of a seed page its best match."""
        started = time.perf_counter()
        first = self.first_stage.search(query, max(self.candidates, k))
        searched = time.perf_counter()
        if not first:
            return [], {}
        scores = {h.chunk_id: h.score for h in first}
        seeds = list(dict.fromkeys(self.doc_of[h.chunk_id] for h in first))[: self.seed_pages]
        links = [link for page in seeds for link in self.out_links.get(page, [])]
        sources = [
            link
            for page in (seeds if self.backward > 0 else [])
            for link in self.in_links.get(page, [])
            if self.doc_of[link[0]] not in seeds  # a seed page already ranks on its own
        ]
        reach: dict[str, float] = {}  # page reached by a link out of a seed page -> best match
        holds: dict[str, float] = {}  # chunk holding a link into a seed page -> best match
        if links or sources:
            query_vector = self.query_vector(query)
            for found, pairs in ((reach, links), (holds, sources)):
                matches = self.context_vectors[[row for _, row, _ in pairs]] @ query_vector if pairs else []
                for (key, _, type_weight), match in zip(pairs, matches, strict=True):
                    # a link whose context does not match (cosine <= 0) adds nothing; it never penalises
                    found[key] = max(found.get(key, 0.0), float(match) * type_weight)
        floor = min(scores.values())
        for cid in [c for page in reach for c in self.chunks_of[page]] + list(holds):
            scores.setdefault(cid, floor)
        final = {
            cid: s + self.weight * reach.get(self.doc_of[cid], 0.0) + self.backward * holds.get(cid, 0.0)
            for cid, s in scores.items()
        }
        self.traces[query] = {
            "seed_pages": seeds,
            "reached": {p: round(v, 4) for p, v in sorted(reach.items())},
            "linking_chunks": {c: round(v, 4) for c, v in sorted(holds.items())},
        }
        self.last_timings = {
            **getattr(self.first_stage, "last_timings", {}),
            "seed_ms": 1000 * (searched - started),
            "links_ms": 1000 * (time.perf_counter() - searched),
        }
        order = sorted(final, key=lambda c: (-final[c], c))
        return [Hit(c, final[c]) for c in order[: max(k, 0)]], reach

    def incoming(self, query_vector: np.ndarray) -> dict[str, float]:
        """Per page, the best match (cosine x type weight, >= 0) of any link into it, from any page: the
        words other pages use for it ("anchor text"), whether or not the linking page ranks."""
        if not self.into:
            return {}
        matches = self.context_vectors @ query_vector
        return {
            page: max(0.0, max(float(matches[row]) * weight for row, weight in links))
            for page, links in self.into.items()
        }

    def query_vector(self, query: str) -> np.ndarray:
        """The question's vector; a dense first stage with the same embedder already computed it."""
        same = getattr(getattr(self.first_stage, "embedder", None), "identity", None)
        if same is not None and same() == self.embedder.identity() and hasattr(self.first_stage, "embed_query"):
            return np.asarray(self.first_stage.embed_query(query))
        return np.asarray(self.embedder.embed_queries([query])[0])

    def trace(self, query: str) -> dict[str, Any]:
        return self.traces.get(query, {})
