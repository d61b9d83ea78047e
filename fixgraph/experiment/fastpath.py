"""How a sweep trial is scored: a fast re-scoring path when the swept parameters allow it, else in full.

A fast path computes what is expensive (channel rankings, model scores) once per study and then turns
each trial's parameters into rankings without running any model. It must give exactly the rankings
the full path would give (tests/unit/test_fastpath.py checks this for `rrf_fusion`).

FAST_PATHS is the hook for other caches: the candidate cache of issue 4 (first-stage candidates with
every scorer's score) registers a path that `supports()` rerank and blend parameters. A path is
chosen when it supports every swept key of the system; otherwise trials run the full evaluation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from fixgraph.config import to_dict
from fixgraph.corpus.models import Chunk
from fixgraph.evaluation.gold import GoldMapping
from fixgraph.evaluation.questions import Question
from fixgraph.experiment.fingerprint import questions_fingerprint
from fixgraph.experiment.sweep_spec import Param
from fixgraph.io import read_json, stable_hash, write_json
from fixgraph.registry import Registry
from fixgraph.retrieval.base import Hit
from fixgraph.retrieval.hybrid import reciprocal_rank_fusion

log = logging.getLogger(__name__)


@dataclass
class SweepContext:
    """Everything a trial is scored against, loaded once per worker."""

    cfg: DictConfig
    system: str
    system_cfg: DictConfig  # the base config of the swept system
    questions: list[Question]
    chunks: list[Chunk]
    mapping: GoldMapping
    cache_dir: Path

    @property
    def doc_of(self) -> dict[str, str]:
        return {c.id: c.doc_id for c in self.chunks}


def trial_system_cfg(base: DictConfig, params: Mapping[str, Any]) -> DictConfig:
    """The swept system's config with a trial's parameters (dotted keys) set."""
    node = OmegaConf.create(to_dict(base))
    for key, value in params.items():
        OmegaConf.update(node, key, value, force_add=False)
    return node


class FastPath(Protocol):
    name: str

    def supports(self, context: SweepContext, keys: Sequence[str]) -> bool:
        """True when every swept key can be applied without running a model."""
        ...

    def prepare(self, context: SweepContext, params: Sequence[Param]) -> None:
        """Compute (or load from `context.cache_dir`, if still valid) whatever the trials re-score from."""
        ...

    def rankings(self, params: Mapping[str, Any]) -> dict[str, list[Hit]]:
        """qid -> ranking for one trial's parameters."""
        ...


FAST_PATHS: Registry[FastPath] = Registry("fast_path")


@FAST_PATHS.register("rrf_fusion")
class FusionFastPath:
    """Hybrid retrieval's RRF re-fused from channel rankings cached at the deepest depth swept."""

    name = "rrf_fusion"
    KEYS = frozenset({"rrf_k", "depth"})

    def __init__(self) -> None:
        self._channels: dict[str, dict[str, list[Hit]]] = {}
        self._base: dict[str, Any] = {}
        self._out_depth = 0

    def supports(self, context: SweepContext, keys: Sequence[str]) -> bool:
        system = context.system_cfg
        return (
            str(system.get("kind")) == "hybrid"
            and str(system.get("fusion", "rrf")) == "rrf"
            and str(context.cfg.reranker.kind) == "none"  # a reranker would reorder what we re-fuse
            and set(keys) <= self.KEYS
        )

    def prepare(self, context: SweepContext, params: Sequence[Param]) -> None:
        from fixgraph.pipeline.stages import open_system

        self._base = to_dict(context.system_cfg)
        self._out_depth = int(context.cfg.evaluation.depth)
        swept = [int(v) for p in params if p.key == "depth" for v in (p.high, *p.grid) if v is not None]
        depth = max([int(self._base.get("depth", 100)), *swept])
        key = stable_hash(
            {
                "channels": self._base.get("channels"),
                "depth": depth,
                "chunks": stable_hash([c.id for c in context.chunks]),
                "questions": questions_fingerprint(context.questions),
            }
        )
        cache = context.cache_dir / "channel_rankings.json"
        if cache.exists():
            stored = read_json(cache)
            if stored.get("key") == key:
                self._channels = {
                    ch: {qid: [Hit(c, s) for c, s in hits] for qid, hits in by_q.items()}
                    for ch, by_q in stored["rankings"].items()
                }
                log.info("fast path %s: channel rankings from %s", self.name, cache)
                return
            log.info("fast path %s: %s is stale (other channels, chunks or questions); recomputing", self.name, cache)
        started = time.perf_counter()
        hybrid = open_system(context.cfg, context.system, context.system_cfg, context.chunks).first_stage
        channels = getattr(hybrid, "channels", {})
        self._channels = {
            name: {q.qid: channel.search(q.question, depth) for q in context.questions}
            for name, channel in channels.items()
        }
        write_json(
            cache,
            {
                "key": key,
                "depth": depth,
                "rankings": {
                    ch: {qid: [[h.chunk_id, h.score] for h in hits] for qid, hits in by_q.items()}
                    for ch, by_q in self._channels.items()
                },
            },
        )
        log.info("fast path %s: channel rankings computed in %.1fs", self.name, time.perf_counter() - started)

    def rankings(self, params: Mapping[str, Any]) -> dict[str, list[Hit]]:
        rrf_k = float(params.get("rrf_k", self._base.get("rrf_k", 60)))
        depth = int(params.get("depth", self._base.get("depth", 100)))
        qids = next(iter(self._channels.values())).keys() if self._channels else []
        # HybridRetriever.search: each channel searched to `depth`, fused, cut to the evaluation depth
        return {
            qid: reciprocal_rank_fusion([by_q[qid][:depth] for by_q in self._channels.values()], rrf_k, self._out_depth)
            for qid in qids
        }


def score_rankings(
    context: SweepContext,
    rankings: Mapping[str, Sequence[Hit]],
    label: str,
    timings: list[dict[str, Any]] | None = None,
) -> pd.DataFrame:
    """The evaluate stage's per-question table for one system's rankings."""
    from fixgraph.evaluation.result import per_question_table as score

    frames = {label: {qid: list(hits) for qid, hits in rankings.items()}}
    rows = timings or [{"system": label, "qid": q.qid} for q in context.questions]
    return score(context.cfg, context.questions, context.mapping, frames, context.doc_of, rows)


class TrialScorer:
    """Scores one trial's parameters: through a fast path when one was chosen, else in full."""

    def __init__(self, context: SweepContext, fast_path: FastPath | None) -> None:
        self.context = context
        self.fast_path = fast_path

    @property
    def path_name(self) -> str:
        return self.fast_path.name if self.fast_path is not None else "full"

    def score(self, params: Mapping[str, Any]) -> pd.DataFrame:
        if self.fast_path is not None:
            return score_rankings(self.context, self.fast_path.rankings(params), self.context.system)
        return self._full(params)

    def _full(self, params: Mapping[str, Any]) -> pd.DataFrame:
        from fixgraph.experiment.evaluate import rank_all

        ctx = self.context
        system_cfg = trial_system_cfg(ctx.system_cfg, params)
        # an index folder per distinct config: parallel workers never rebuild one another's index
        label = f"sweep-{ctx.system}-{stable_hash(to_dict(system_cfg))[:12]}"
        cfg = OmegaConf.create(to_dict(ctx.cfg))
        cfg.systems = OmegaConf.create({label: to_dict(system_cfg)})
        rankings, timings = rank_all(cfg, ctx.questions, ctx.chunks)
        return score_rankings(ctx, rankings[label], ctx.system, [{**t, "system": ctx.system} for t in timings])


def choose_fast_path(context: SweepContext, keys: Sequence[str], enabled: bool = True) -> FastPath | None:
    if not enabled:
        return None
    for name in FAST_PATHS.names():
        path = FAST_PATHS.get(name)()
        if path.supports(context, keys):
            return path
    return None
