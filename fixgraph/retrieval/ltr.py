"""Learning to rank: a first stage's candidates scored again by a linear model over signals fixgraph
already computes.

Each of these signals, added on its own to the best system (BM25 fusion, the words of links into a
page, page scores, chunk length), moved recall@8 by a question or two, in different directions on the
two corpora. Together, with weights fitted on one corpus's dev questions, they lift the other corpus's
bridge questions, and only with the link signals (docs/results/quality.md, "Learning to rank"). For
the `candidates` best chunks of `first_stage` (link expansion over a dense first stage with line
scores, or that dense retriever itself), every signal of SIGNALS:

    own, line    the dense cosine of the chunk's own vector, and of its best line
    reach        link expansion's match: the best link from a seed page into the chunk's page
    anchor       the best match of any link into the chunk's page, from any page (its anchor words)
    bm25         the chunk's BM25 score / the question's best BM25 score
    page_best    the best dense score among the page's chunks - the question's best
    page_rank    1 / the rank of the chunk's page, pages ordered by their best chunk
    log_tokens   log(1 + the chunk's tokens): a longer chunk holds more of an answer

and the chunk scores sum_s weights[s] x s. reach and anchor (GRAPH_SIGNALS) need a link expansion
first stage. The weights are config values; `fixgraph fit-ltr` (experiment/ltr_fit.py) fits them (pairwise
logistic regression on dev questions), scores each corpus with weights fitted on the other and writes them
as a retriever config. Nothing is
trained at index time: the index is the first stage's and BM25's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from fixgraph.corpus.models import Chunk
from fixgraph.retrieval.base import (
    RETRIEVERS,
    Hit,
    RecentTraces,
    build_first_stage,
    build_retriever,
    load_first_stage,
)

SIGNALS = ("own", "line", "reach", "anchor", "bm25", "page_best", "page_rank", "log_tokens")
GRAPH_SIGNALS = ("reach", "anchor")
TRACE_TOP = 10  # hits whose score the trace breaks down by signal


def weight_vector(weights: Mapping[str, float]) -> np.ndarray:
    """A config's weights in SIGNALS order; a signal it leaves out weighs 0."""
    return np.array([float(weights.get(s, 0.0)) for s in SIGNALS])


def page_scores(blocks: np.ndarray, page: np.ndarray, n_pages: int) -> tuple[np.ndarray, np.ndarray]:
    """Per page: the best chunk score (`blocks`, chunks in index order; `page`: each chunk's page number), and
    the page's rank (1 = best) when pages are ordered by it, ties by page number."""
    page_best = np.full(n_pages, -np.inf)
    np.maximum.at(page_best, page, blocks)
    rank = np.empty(n_pages)
    rank[np.lexsort((np.arange(n_pages), -page_best))] = np.arange(1, n_pages + 1)
    return page_best, rank


@RETRIEVERS.register("ltr")
class LearnedRankRetriever:
    def __init__(
        self,
        name: str = "ltr",
        first_stage: Any = None,
        lexical: Any = None,
        weights: Mapping[str, float] | None = None,
        candidates: int = 100,
        depth: int = 100,
    ) -> None:
        if first_stage is None or lexical is None:
            raise ValueError(f"retriever {name}: needs a `first_stage` (link expansion or dense) and `lexical` (BM25)")
        unknown = sorted(set(weights or {}) - set(SIGNALS))
        if unknown or not weights:
            given = unknown or "none given"
            raise ValueError(f"retriever {name}: `weights` must name signals of {', '.join(SIGNALS)}; unknown: {given}")
        if candidates < 1:
            raise ValueError(f"retriever {name}: candidates must be >= 1")
        self.name, self.candidates, self.depth = name, candidates, depth
        self.weights = weight_vector(weights)
        stage: Any = build_retriever(first_stage)  # link expansion or dense, told apart here
        self.linked = hasattr(stage, "expand")
        self.first_stage, self.dense = stage, stage.first_stage if self.linked else stage
        self.lexical: Any = build_retriever(lexical)
        if not hasattr(self.dense, "own_and_line") or not hasattr(self.dense, "blend"):
            raise ValueError(f"retriever {name}: the first stage must be dense, or link expansion over a dense one")
        if not hasattr(self.lexical, "scores"):
            raise ValueError(f"retriever {name}: `lexical` must give every chunk a score (bm25, backend bm25s)")
        graph = [s for s in GRAPH_SIGNALS if weights.get(s, 0.0) != 0.0]
        if graph and not self.linked:
            raise ValueError(f"retriever {name}: weights on {', '.join(graph)} need a link_expansion first stage")
        self._position: dict[str, int] = {}  # chunk id -> position in index order
        self._page = np.zeros(0, dtype=np.int64)  # chunk position -> page number
        self._pages: list[str] = []
        self._log_tokens = np.zeros(0)
        self.last_timings: dict[str, float] = {}
        self.traces = RecentTraces()  # query -> its top hits' weight x signal terms

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        build_first_stage(self.first_stage, chunks, workdir)
        self.lexical.build(chunks, workdir / "lexical")

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        load_first_stage(self.first_stage, chunks, workdir)
        self.lexical.load(chunks, workdir / "lexical")
        self._position = {c.id: i for i, c in enumerate(chunks)}
        self._pages = sorted({c.doc_id for c in chunks})
        number = {p: i for i, p in enumerate(self._pages)}
        self._page = np.array([number[c.doc_id] for c in chunks], dtype=np.int64)
        self._log_tokens = np.log1p([c.n_tokens for c in chunks])

    def signals(self, query: str, k: int = 0) -> tuple[list[Hit], np.ndarray]:
        """The first stage's candidates (`candidates`, or k if more) and one row of SIGNALS per candidate
        (what the weights multiply)."""
        vector = np.asarray(self.dense.embed_query(query))
        depth = max(self.candidates, k)
        if self.linked:
            hits, reach = self.first_stage.expand(query, depth)
            anchor = self.first_stage.incoming(vector)
        else:
            hits, reach, anchor = self.first_stage.search(query, depth), {}, {}
        own, line = self.dense.own_and_line(vector)
        blocks = self.dense.blend(own, line)  # the dense score, from the cosines already computed
        best = blocks.max()
        page_best, rank = page_scores(blocks, self._page, len(self._pages))
        lexical = np.asarray(self.lexical.scores(query), dtype=np.float64)
        lexical = lexical / lexical.max() if lexical.max() > 0 else lexical
        rows = []
        for hit in hits:
            i = self._position[hit.chunk_id]
            page = self._page[i]
            name = self._pages[page]
            rows.append(
                [
                    own[i],
                    line[i],
                    reach.get(name, 0.0),
                    anchor.get(name, 0.0),
                    lexical[i],
                    page_best[page] - best,
                    1.0 / rank[page],
                    self._log_tokens[i],
                ]
            )
        return hits, np.asarray(rows, dtype=np.float64).reshape(len(hits), len(SIGNALS))

    def search(self, query: str, k: int) -> list[Hit]:
        started = time.perf_counter()
        hits, signals = self.signals(query, k)
        scored = time.perf_counter()
        scores = signals @ self.weights
        order = sorted(range(len(hits)), key=lambda j: (-scores[j], hits[j].chunk_id))
        terms = signals * self.weights
        used = [i for i, w in enumerate(self.weights) if w != 0.0]
        self.traces[query] = [
            {"chunk": hits[j].chunk_id, "score": round(float(scores[j]), 4),
             **{SIGNALS[i]: round(float(terms[j, i]), 4) for i in used}}
            for j in order[:TRACE_TOP]
        ]  # fmt: skip
        self.last_timings = {
            **getattr(self.first_stage, "last_timings", {}),
            "signals_ms": 1000 * (scored - started),
            "rank_ms": 1000 * (time.perf_counter() - scored),
        }
        return [Hit(hits[j].chunk_id, float(scores[j])) for j in order[: max(k, 0)]]

    def trace(self, query: str) -> dict[str, Any]:
        """The first stage's trace (link expansion: seeds, pages reached) and, for the top hits, each
        signal's term (weight x value) of the score: why a chunk ranks where it does."""
        trace = getattr(self.first_stage, "trace", None)
        return {**(trace(query) if trace is not None else {}), "terms": self.traces.get(query, [])}
