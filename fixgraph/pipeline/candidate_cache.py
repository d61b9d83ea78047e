"""Candidate cache: per question, each first stage's top-`depth` list and every scorer's score.

A sweep over fusion and reranking parameters then re-scores from the cache (rescore.py) without
running a model. The cache is keyed by everything that affects its content (channel configs and
embedder identities, scorer identities incl. model weight hashes, depth, score_depth, the question
file and chunk hashes, retrieval code); `open_cache` compares the stored key with the one the current
config implies and raises StaleCacheError naming what changed, so a stale cache is never used.

Layout (artifacts/candidates/<corpus>/<split>/): manifest.json (key + its components),
candidates.parquet (qid, channel, rank, chunk_id, score), scores.parquet (qid, chunk_id, <scorer>...).
Scorers score the union of every channel's top `score_depth`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from omegaconf import DictConfig

from fixgraph.config import ConfigError, to_dict
from fixgraph.corpus.models import Chunk
from fixgraph.evaluation.questions import Question
from fixgraph.io import atomic_dir, read_json, sha256_file, stable_hash, write_json
from fixgraph.retrieval.base import Hit, Retriever, build_retriever
from fixgraph.retrieval.rerank import Scorer, build_reranker

log = logging.getLogger(__name__)


class StaleCacheError(ConfigError):
    """The cache on disk was built from other inputs than the current config implies (a user error: the
    CLI reports it in one line)."""


@dataclass
class CandidateCache:
    key: str
    components: dict[str, Any]
    channels: list[str]
    scorers: list[str]
    # qid -> channel -> ranked hits (top `depth`)
    lists: dict[str, dict[str, list[Hit]]]
    # qid -> chunk id -> scorer -> score
    scores: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)

    @property
    def qids(self) -> list[str]:
        return list(self.lists)


def cache_components(
    cfg: DictConfig,
    questions_path: Path,
    chunks_path: Path,
    channels: Mapping[str, Retriever],
    scorers: Mapping[str, Any],
) -> dict[str, Any]:
    from fixgraph.pipeline.stages import code_hash

    spec = cfg.candidates

    def channel_identity(retriever: Retriever) -> str:
        embedder = getattr(retriever, "embedder", None)
        return embedder.identity() if embedder is not None else ""

    return {
        "channels": {k: to_dict(c) for k, c in spec.channels.items()},
        "embedders": {k: channel_identity(r) for k, r in channels.items()},
        "scorers": {k: s.identity() for k, s in scorers.items()},
        "depth": int(spec.depth),
        "score_depth": int(spec.score_depth),
        "questions": sha256_file(questions_path),
        "chunks": sha256_file(chunks_path),
        "code": code_hash("retrieval"),
    }


def _describe_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    changed = sorted(k for k in set(old) | set(new) if stable_hash(old.get(k)) != stable_hash(new.get(k)))
    return ", ".join(changed) or "key format"


def build_cache(
    cfg: DictConfig,
    questions: Sequence[Question],
    questions_path: Path,
    chunks: Sequence[Chunk],
    chunks_path: Path,
    out: Path,
    index_root: Path,
) -> CandidateCache:
    """Run every channel over every question, score the candidate pool with every scorer, save."""
    from fixgraph.pipeline.stages import index_key, run_stage

    spec = cfg.candidates
    depth, score_depth = int(spec.depth), int(spec.score_depth)
    channels: dict[str, Retriever] = {}
    for key, channel_cfg in spec.channels.items():
        retriever = build_retriever(channel_cfg)
        folder = index_root / str(key)
        run_stage(f"candidates-index[{key}]", folder, index_key(cfg, channel_cfg), _builder(retriever, chunks))
        retriever.load(chunks, folder)
        channels[str(key)] = retriever
    scorers = build_scorers(spec)
    components = cache_components(cfg, questions_path, chunks_path, channels, scorers)
    texts = {c.id: c.index_text() for c in chunks}
    lists: dict[str, dict[str, list[Hit]]] = {}
    scores: dict[str, dict[str, dict[str, float]]] = {}
    started = time.perf_counter()
    for question in questions:
        lists[question.qid] = {k: r.search(question.question, depth) for k, r in channels.items()}
        pool = sorted({h.chunk_id for hits in lists[question.qid].values() for h in hits[:score_depth]})
        per_chunk: dict[str, dict[str, float]] = {cid: {} for cid in pool}
        for name, scorer in scorers.items():
            values = scorer.score(question.question, [texts[cid] for cid in pool])
            for cid, value in zip(pool, values, strict=True):
                per_chunk[cid][name] = float(value)
        scores[question.qid] = per_chunk
    log.info("candidate cache: %d questions in %.1fs", len(questions), time.perf_counter() - started)
    cache = CandidateCache(stable_hash(components), components, list(channels), list(scorers), lists, scores)
    save_cache(cache, out)
    return cache


def _builder(retriever: Retriever, chunks: Sequence[Chunk]) -> Callable[[Path], dict[str, Any]]:
    def produce(out: Path) -> dict[str, Any]:
        retriever.build(chunks, out)
        return {"chunks": len(chunks)}

    return produce


def build_scorers(spec: Any) -> dict[str, Scorer]:
    scorers: dict[str, Scorer] = {}
    for key, scorer_cfg in (spec.get("scorers") or {}).items():
        scorer = build_reranker(scorer_cfg)
        if not hasattr(scorer, "score") or not hasattr(scorer, "identity"):
            raise ConfigError(f"candidates: scorer {key!r} ({scorer.name}) gives no per-candidate scores")
        scorers[str(key)] = scorer  # type: ignore[assignment]
    return scorers


def save_cache(cache: CandidateCache, out: Path) -> None:
    rows = [
        {"qid": qid, "channel": channel, "rank": rank, "chunk_id": hit.chunk_id, "score": hit.score}
        for qid, per_channel in cache.lists.items()
        for channel, hits in per_channel.items()
        for rank, hit in enumerate(hits, start=1)
    ]
    score_rows = [
        {"qid": qid, "chunk_id": cid, **values}
        for qid, per_chunk in cache.scores.items()
        for cid, values in per_chunk.items()
    ]
    with atomic_dir(out) as tmp:
        pd.DataFrame(rows, columns=["qid", "channel", "rank", "chunk_id", "score"]).to_parquet(
            tmp / "candidates.parquet"
        )
        pd.DataFrame(score_rows, columns=["qid", "chunk_id", *cache.scorers]).to_parquet(tmp / "scores.parquet")
        write_json(
            tmp / "manifest.json",
            {
                "key": cache.key,
                "components": cache.components,
                "channels": cache.channels,
                "scorers": cache.scorers,
                "qids": cache.qids,
            },
        )


def load_cache(folder: Path, expected: Mapping[str, Any] | None = None) -> CandidateCache:
    """Load a cache; with `expected` components, raise StaleCacheError unless they match exactly."""
    manifest_path = folder / "manifest.json"
    if not manifest_path.exists():
        raise FileNotFoundError(f"{folder}: no candidate cache; build it with `fixgraph candidates`")
    manifest = read_json(manifest_path)
    if expected is not None and manifest["key"] != stable_hash(dict(expected)):
        raise StaleCacheError(
            f"{folder}: candidate cache is stale ({_describe_change(manifest['components'], expected)} changed); "
            "rebuild it with `fixgraph candidates`"
        )
    frame = pd.read_parquet(folder / "candidates.parquet")
    lists: dict[str, dict[str, list[Hit]]] = {qid: {c: [] for c in manifest["channels"]} for qid in manifest["qids"]}
    for qid, channel, cid, score in zip(frame["qid"], frame["channel"], frame["chunk_id"], frame["score"], strict=True):
        lists[qid][channel].append(Hit(cid, float(score)))  # rows are stored in rank order
    score_frame = pd.read_parquet(folder / "scores.parquet")
    scores: dict[str, dict[str, dict[str, float]]] = {qid: {} for qid in manifest["qids"]}
    columns = [score_frame[s].to_numpy(dtype=np.float64) for s in manifest["scorers"]]
    for row, (qid, cid) in enumerate(zip(score_frame["qid"], score_frame["chunk_id"], strict=True)):
        scores[qid][cid] = {s: float(col[row]) for s, col in zip(manifest["scorers"], columns, strict=True)}
    return CandidateCache(
        manifest["key"], manifest["components"], manifest["channels"], manifest["scorers"], lists, scores
    )


def check_spec(cfg: DictConfig) -> None:
    spec = cfg.get("candidates")
    if spec is None or not spec.get("channels"):
        raise ConfigError("candidates: needs `candidates.channels` (retriever configs) in the config")
