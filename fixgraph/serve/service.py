"""The served system: one object holding what every endpoint needs, opened once at start-up.

Systems come from `systems_of(cfg)` and are opened with `open_system`, exactly as the benchmark opens
them (same index, same reranker); the answerer is the `answer` group's, the model the `llm` group's
(through `build_llm`, so calls are cached and counted), the verifier `answer.verify`'s. Each system
has a lock: a retriever keeps per-search state (`last_timings`), so one search runs at a time on it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig

from fixgraph.answer.base import build_answerer
from fixgraph.answer.verify import build_verifier
from fixgraph.config import systems_of, to_dict
from fixgraph.corpus.models import Chunk
from fixgraph.evaluation.gold import map_gold
from fixgraph.evaluation.questions import Question
from fixgraph.llm.base import build_llm
from fixgraph.pipeline.graph import graph_dir
from fixgraph.pipeline.stages import chunk, load_chunks, load_documents, open_system
from fixgraph.retrieval.base import Hit
from fixgraph.retrieval.system import System
from fixgraph.serve.diagnose import Diagnoser
from fixgraph.serve.graphview import GraphView
from fixgraph.serve.settings import ServeSettings
from fixgraph.serve.source import Served

log = logging.getLogger(__name__)


class Service:
    def __init__(self, served: Served, settings: ServeSettings) -> None:
        cfg = served.cfg
        self.cfg: DictConfig = cfg
        self.served = served
        self.settings = settings
        self.default_system = served.system
        self.system_configs = systems_of(cfg)
        chunk(cfg)  # up to date or built, like every stage
        self.chunk_list: list[Chunk] = load_chunks(cfg)
        self.chunks = {c.id: c for c in self.chunk_list}
        self.documents = {d.id: d for d in load_documents(cfg)}
        self.answerer = build_answerer(cfg.answer)
        self.llm = build_llm(cfg.llm)
        self.verifier, self.verify_enabled = build_verifier(to_dict(cfg.answer.get("verify") or {}), self.llm)
        folder = graph_dir(cfg)
        self.graph = GraphView.load(folder) if (folder / "nodes.parquet").exists() else None
        self.diagnoser = Diagnoser(self.documents, self.chunk_list, self.graph)
        self._systems: dict[str, System] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._opening = threading.Lock()
        self._stats: Counter[str] = Counter()
        self._stats_lock = threading.Lock()
        self.started = time.time()
        self.system(self.default_system)  # open now: the first request is not the slow one

    # -- systems and search -------------------------------------------------------------------------

    def system(self, name: str | None) -> tuple[System, threading.Lock]:
        name = name or self.default_system
        if name not in self.system_configs:
            raise KeyError(f"unknown system {name!r}; configured systems: {', '.join(self.system_configs)}")
        with self._opening:
            if name not in self._systems:
                started = time.perf_counter()
                self._systems[name] = open_system(self.cfg, name, self.system_configs[name], self.chunk_list)
                self._locks[name] = threading.Lock()
                log.info("opened system %s in %.1fs", name, time.perf_counter() - started)
            return self._systems[name], self._locks[name]

    def search_hits(self, query: str, k: int, system: str | None = None) -> tuple[list[Hit], dict[str, float]]:
        """The system's ranking and its per-stage timings (ms), plus `search_ms` measured around it."""
        opened, lock = self.system(system)
        with lock:
            started = time.perf_counter()
            hits = opened.search(query, k)
            elapsed = 1000 * (time.perf_counter() - started)
            timings = {key: round(value, 3) for key, value in opened.last_timings.items()}
        timings["search_ms"] = round(elapsed, 3)
        return hits, timings

    def hit_info(self, rank: int, hit: Hit, with_text: bool = True) -> dict[str, Any]:
        c = self.chunks[hit.chunk_id]
        info: dict[str, Any] = {
            "rank": rank,
            "chunk_id": c.id,
            "doc_id": c.doc_id,
            "title": c.title,
            "section": " > ".join(c.heading_path),
            "start": c.start,
            "end": c.end,
            "score": float(hit.score),
        }
        if with_text:
            info["text"] = c.text
        return info

    def search(self, query: str, k: int, system: str | None = None) -> dict[str, Any]:
        name = system or self.default_system
        hits, timings = self.search_hits(query, k, name)
        return {
            "system": name,
            "query": query,
            "k": k,
            "hits": [self.hit_info(i, h) for i, h in enumerate(hits, start=1)],
            "timings": timings,
        }

    # -- documents, graph, questions --------------------------------------------------------------

    def document(self, doc_id: str) -> dict[str, Any] | None:
        doc = self.documents.get(doc_id)
        if doc is None:
            return None
        return {
            "doc_id": doc.id,
            "title": doc.title,
            "url": doc.url,
            "source": doc.source,
            "license": doc.license,
            "text": doc.text,
            "sections": [{"id": s.id, "title": s.title, "start": s.start, "end": s.end} for s in doc.sections],
            "chunks": [
                {"chunk_id": c.id, "start": c.start, "end": c.end} for c in self.diagnoser.index.chunks_of(doc.id)
            ],
        }

    def questions(self) -> list[Question]:
        """The configured split's questions, only when it cannot expose the locked test part."""
        from fixgraph.evaluation.splits import build_split

        split = self.cfg.split
        if str(split.get("kind")) == "frozen" and str(split.get("part")) != "dev":
            return []
        if str(split.get("kind")) == "file" and str(split.get("questions")) == str(self.cfg.splitting.pool):
            return []  # the whole pool holds the test questions
        return build_split(split).load()

    def compare(self, question: str, systems: Sequence[str], k: int, qid: str | None = None) -> dict[str, Any]:
        """Each system's top k on one question and, for a question from the split, where its gold lies
        in each system's ranking down to `evaluation.depth` (None: not retrieved that deep)."""
        gold: list[str] = []
        answer_pages: set[str] = set()
        asked: Question | None = None
        if qid is not None:
            found = [q for q in self.questions() if q.qid == qid]
            if not found:
                raise KeyError(f"no question {qid!r} in the served split")
            asked = found[0]
            question = asked.question
            mapping = map_gold([asked], list(self.documents.values()), self.chunk_list)
            gold = list(dict.fromkeys(cid for item in mapping.items for cid in item.chunk_ids))
            answer_pages = asked.answer_pages
        depth = int(self.cfg.evaluation.depth)
        sides = []
        for name in systems:
            hits, timings = self.search_hits(question, max(depth, k), name)
            ranks = {h.chunk_id: i for i, h in enumerate(hits, start=1)}
            page_rank = next((i for i, h in enumerate(hits, 1) if self.chunks[h.chunk_id].doc_id in answer_pages), None)
            sides.append(
                {
                    "system": name,
                    "hits": [self.hit_info(i, h, with_text=False) for i, h in enumerate(hits[:k], start=1)],
                    "gold_ranks": {cid: ranks.get(cid) for cid in gold},
                    "answer_page_rank": page_rank,
                    "timings": timings,
                }
            )
        return {
            "question": question,
            "qid": qid,
            "gold": [{"chunk_id": cid, "doc_id": self.chunks[cid].doc_id} for cid in gold],
            "answer_pages": sorted(answer_pages),
            "depth": depth,
            "systems": sides,
            "qtype": asked.qtype if asked else None,
        }

    # -- bookkeeping ------------------------------------------------------------------------------

    def count(self, key: str, delta: int = 1) -> None:
        with self._stats_lock:
            self._stats[key] += delta

    def health(self) -> dict[str, Any]:
        with self._stats_lock:
            stats = dict(self._stats)
        return {
            "status": "ok",
            "system": self.default_system,
            "opened_systems": sorted(self._systems),
            "corpus": str(self.cfg.corpus.name),
            "documents": len(self.documents),
            "chunks": len(self.chunk_list),
            "graph": self.graph is not None,
            "llm": str(self.cfg.llm.name),
            "uptime_s": round(time.time() - self.started, 1),
            "streams": {k.removeprefix("streams_"): v for k, v in sorted(stats.items()) if k.startswith("streams_")},
        }

    def describe(self) -> dict[str, Any]:
        """What is served: for /config (secrets redacted)."""
        from fixgraph.redact import redact

        return {
            "system": self.default_system,
            "systems": list(self.system_configs),
            "origin": self.served.origin,
            "answerer": str(self.cfg.answer.name),
            "llm": str(self.cfg.llm.name),
            "verify": self.settings.verify and self.verify_enabled,
            "config": redact(to_dict(self.cfg)),
        }
