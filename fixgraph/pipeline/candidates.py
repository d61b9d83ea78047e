"""The candidate cache: what every leaf retriever returned and every scorer said, replayed through the
live System code.

A system is a tree: a first stage (a leaf retriever, or a hybrid fusing leaves, possibly nested) and an
optional reranker (a scorer, or a blend of scorers). Fusion and blending are cheap; leaves and scorers
run models. `replay_system(...)` builds the System from its config exactly as `open_system` does, swaps
every leaf for a `RecordedRetriever` and every scorer for a `RecordedScorer`, and runs the same
`System.search`. A recorded value is keyed by its component's identity (its resolved config, the
chunks, the code, and for graph retrievers the graph), the depth asked for and the query text; a miss
runs the real component once and records it. So a replayed ranking equals the live one by
construction, and a sweep pays once for each distinct leaf and scorer, however many trials combine them.

Store: artifacts/candidates/<corpus>/cache.sqlite (tables `rankings` and `scores`; sqlite because
several sweep workers fill it at once). `fixgraph candidates` fills it for the configured systems.
"""

from __future__ import annotations

import copy
import json
import logging
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from fixgraph.config import config_strings, to_dict
from fixgraph.corpus.models import Chunk
from fixgraph.evaluation.questions import Question
from fixgraph.io import sha256_text, stable_hash
from fixgraph.modelpaths import MODEL_CARD, model_identity
from fixgraph.pipeline.layout import Layout
from fixgraph.pipeline.stages import code_hash, open_system
from fixgraph.retrieval.base import Hit, Retriever, build_retriever
from fixgraph.retrieval.blend import BlendReranker
from fixgraph.retrieval.hybrid import HybridRetriever
from fixgraph.retrieval.rerank import NoReranker, Reranker, RerankWith, ScorerReranker, build_reranker
from fixgraph.retrieval.system import System

log = logging.getLogger(__name__)
SCHEMA = """
CREATE TABLE IF NOT EXISTS rankings (leaf TEXT, depth INTEGER, query TEXT, hits TEXT,
                                     PRIMARY KEY (leaf, depth, query));
CREATE TABLE IF NOT EXISTS scores (scorer TEXT, query TEXT, passage TEXT, score REAL,
                                   PRIMARY KEY (scorer, query, passage));
CREATE TABLE IF NOT EXISTS components (identity TEXT PRIMARY KEY, config TEXT);
"""


class NotReplayable(ValueError):
    """A system holds a component the cache cannot record (it then runs live)."""


@dataclass
class CacheStats:
    """How a replay was served: recorded values reused, and values computed (and recorded) live."""

    hits: int = 0
    misses: int = 0

    @property
    def path(self) -> str:
        return "cached" if self.misses == 0 else "live"


class CandidateStore:
    """The sqlite file of recorded leaf rankings and scorer scores of one corpus."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(path, timeout=60)
        self._db.executescript(SCHEMA)
        self.stats = CacheStats()

    @classmethod
    def of(cls, cfg: DictConfig) -> CandidateStore:
        layout = Layout.from_config(cfg)
        return cls(layout.artifacts / "candidates" / layout.corpus_name / "cache.sqlite")

    def close(self) -> None:
        self._db.close()

    def remember(self, identity: str, config: Mapping[str, Any]) -> None:
        with self._db:
            self._db.execute(
                "INSERT OR IGNORE INTO components VALUES (?, ?)", (identity, json.dumps(config, sort_keys=True))
            )

    def rankings(self, leaf: str, depth: int) -> dict[str, list[Hit]]:
        rows = self._db.execute("SELECT query, hits FROM rankings WHERE leaf = ? AND depth = ?", (leaf, depth))
        return {query: [Hit(c, s) for c, s in json.loads(hits)] for query, hits in rows}

    def add_ranking(self, leaf: str, depth: int, query: str, hits: Sequence[Hit]) -> None:
        encoded = json.dumps([[h.chunk_id, h.score] for h in hits])
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO rankings VALUES (?, ?, ?, ?)", (leaf, depth, query, encoded))

    def scores(self, scorer: str, query: str) -> dict[str, float]:
        rows = self._db.execute("SELECT passage, score FROM scores WHERE scorer = ? AND query = ?", (scorer, query))
        return dict(rows.fetchall())

    def add_scores(self, scorer: str, query: str, values: Mapping[str, float]) -> None:
        with self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO scores VALUES (?, ?, ?, ?)",
                [(scorer, query, passage, float(score)) for passage, score in values.items()],
            )


class RecordedRetriever:
    """A leaf retriever replayed from the store; a miss opens the real leaf once and records its answer.
    Queries are keyed by their text's hash, so the same question in another file reuses the record."""

    def __init__(self, store: CandidateStore, identity: str, name: str, opener: Callable[[], Retriever]) -> None:
        self.store = store
        self.identity = identity
        self.name = name
        self._opener = opener
        self._live: Retriever | None = None
        self._recorded: dict[int, dict[str, list[Hit]]] = {}
        self.last_timings: dict[str, float] = {}

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:  # pragma: no cover - never indexed
        raise NotReplayable("a recorded retriever has no index of its own")

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:  # pragma: no cover - never indexed
        raise NotReplayable("a recorded retriever has no index of its own")

    def search(self, query: str, k: int) -> list[Hit]:
        recorded = self._recorded.get(k)
        if recorded is None:
            recorded = self._recorded[k] = self.store.rankings(self.identity, k)
        key = sha256_text(query)
        if key in recorded:
            self.store.stats.hits += 1
            return list(recorded[key])
        self.store.stats.misses += 1
        if self._live is None:
            self._live = self._opener()
        hits = self._live.search(query, k)
        recorded[key] = hits
        self.store.add_ranking(self.identity, k, key, hits)
        return list(hits)


class RecordedScorer:
    """A scorer replayed from the store, keyed by (query, passage) text hashes; misses are scored live.
    Before its first live score, a scorer with per-passage state (a bi-encoder's vectors) gets every
    passage at once (`prepare`), as an opened system would: one batch instead of a few per question."""

    def __init__(self, store: CandidateStore, scorer: Any, passages: Sequence[str] = ()) -> None:
        self.store = store
        self.scorer = scorer
        self.name = str(scorer.name)
        self._identity = str(scorer.identity())
        self._passages = list(passages)
        self._prepared = False

    def identity(self) -> str:
        return self._identity

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        qkey = sha256_text(query)
        recorded = self.store.scores(self._identity, qkey)
        keys = [sha256_text(p) for p in passages]
        missing = [i for i, key in enumerate(keys) if key not in recorded]
        self.store.stats.hits += len(keys) - len(missing)
        if missing:
            self.store.stats.misses += len(missing)
            prepare = getattr(self.scorer, "prepare", None)
            if prepare is not None and not self._prepared:
                prepare(self._passages)
                self._prepared = True
            fresh = self.scorer.score(query, [passages[i] for i in missing])
            added = {keys[i]: float(v) for i, v in zip(missing, fresh, strict=True)}
            self.store.add_scores(self._identity, qkey, added)
            recorded.update(added)
        return np.asarray([recorded[key] for key in keys], dtype=np.float64)


def is_trained(value: str) -> bool:
    """A config string naming a folder with a model card: a model fixgraph trained."""
    return "/" in value and (Path(value).expanduser() / MODEL_CARD).is_file()


@dataclass
class Replayer:
    """Builds replaying systems for one corpus state: `cfg` (paths, chunks) and its chunks."""

    cfg: DictConfig
    chunks: list[Chunk]
    store: CandidateStore
    _leaves: dict[str, RecordedRetriever] = field(default_factory=dict)
    _scorers: dict[str, RecordedScorer] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._chunks_hash = stable_hash([(c.id, sha256_text(c.index_text())) for c in self.chunks])
        self._texts = {c.id: c.index_text() for c in self.chunks}

    def leaf_identity(self, leaf_cfg: Mapping[str, Any]) -> str:
        parts: dict[str, Any] = {
            "config": dict(leaf_cfg),
            "chunks": self._chunks_hash,
            "code": code_hash("retrieval", "embedders", "kg"),
            # a model fixgraph trained is named by its folder, which a retrain refills: its weights count
            "models": {value: model_identity(value) for _, value in config_strings(leaf_cfg) if is_trained(value)},
        }
        graph_dir = leaf_cfg.get("graph_dir")
        if graph_dir:  # graph retrievers read the graph stage's output: its key says what was built
            marker = Path(str(graph_dir)) / "stage.json"
            if not marker.exists():
                from fixgraph.pipeline.graph import build as build_graph

                build_graph(self.cfg, track=False)
            parts["graph"] = json.loads(marker.read_text())["key"] if marker.exists() else None
        return stable_hash(parts)

    def retriever(self, node: Any) -> Retriever:
        """A first stage whose leaves replay; hybrids and reranked systems keep their live code."""
        fields = to_dict(node)
        kind = str(fields.get("kind"))
        if kind == "reranked":
            return self.system(node)
        if kind == "hybrid":
            hybrid = build_retriever(fields)
            assert isinstance(hybrid, HybridRetriever)
            hybrid.channels = {str(k): self.retriever(c) for k, c in fields["channels"].items()}
            return hybrid
        identity = self.leaf_identity(fields)
        if identity not in self._leaves:
            self.store.remember(identity, fields)
            name = f"cache-{fields.get('name', kind)}-{identity[:12]}"
            self._leaves[identity] = RecordedRetriever(
                self.store, identity, str(fields.get("name", kind)), lambda: self._open_leaf(name, fields)
            )
        return self._leaves[identity]

    def _open_leaf(self, name: str, fields: dict[str, Any]) -> Retriever:
        log.info("candidate cache: running %s live (not recorded yet)", fields.get("name"))
        return open_system(self.cfg, name, OmegaConf.create(fields), self.chunks).first_stage

    def reranker(self, node: Any) -> Reranker:
        built = build_reranker(node)
        if isinstance(built, NoReranker):
            return built
        if isinstance(built, BlendReranker):
            blend = copy.copy(built)
            blend.scorers = {k: self._recorded_scorer(s) for k, s in built.scorers.items()}
            return blend
        if isinstance(built, ScorerReranker):
            return RerankWith(built.name, self._recorded_scorer(built), built.top_n)
        raise NotReplayable(f"reranker {built.name!r} ({type(built).__name__}) gives no per-candidate scores")

    def _recorded_scorer(self, scorer: Any) -> RecordedScorer:
        identity = str(scorer.identity())
        if identity not in self._scorers:
            self._scorers[identity] = RecordedScorer(self.store, scorer, list(self._texts.values()))
        return self._scorers[identity]

    def system(self, node: Any) -> System:
        fields = to_dict(node)
        if str(fields.get("kind")) != "reranked":
            replayed = System(str(fields.get("name")), self.retriever(fields))
        else:
            replayed = System(
                str(fields["name"]),
                self.retriever(fields["first_stage"]),
                self.reranker(fields["reranker"]),
                int(fields.get("depth", 100)),
            )
        replayed.texts = self._texts
        return replayed


def replay_rankings(
    replayer: Replayer, system: Any, questions: Sequence[Question], depth: int
) -> tuple[dict[str, list[Hit]], CacheStats]:
    """qid -> ranking of one system (a config, or a System `replayer.system` built) over `questions`,
    replayed (and recorded where new), with what it cost the cache."""
    before = CacheStats(replayer.store.stats.hits, replayer.store.stats.misses)
    replayed = system if isinstance(system, System) else replayer.system(system)
    rankings = {q.qid: replayed.search(q.question, depth) for q in questions}
    stats = replayer.store.stats
    return rankings, CacheStats(stats.hits - before.hits, stats.misses - before.misses)


def record_candidates(cfg: DictConfig) -> dict[str, CacheStats]:
    """`fixgraph candidates`: record every configured system's leaves and scorers over the split's
    questions, so later sweeps and benchmarks over them replay without running a model."""
    from fixgraph.config import systems_of
    from fixgraph.evaluation.splits import build_split
    from fixgraph.pipeline.stages import chunk, load_chunks

    questions = build_split(cfg.split).load()
    chunk(cfg)
    replayer = Replayer(cfg, load_chunks(cfg), CandidateStore.of(cfg))
    try:
        return {
            name: replay_rankings(replayer, system_cfg, questions, int(cfg.evaluation.depth))[1]
            for name, system_cfg in systems_of(cfg).items()
        }
    finally:
        replayer.store.close()
