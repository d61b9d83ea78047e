"""The `candidates` stage: build the candidate cache of a split, or open it for a sweep.

cache = open_cache(cfg)     # StaleCacheError if anything that shaped it has changed
rescore(cache, RescoreParams(...))
"""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from fixgraph.evaluation.splits import build_split
from fixgraph.pipeline.candidate_cache import (
    CandidateCache,
    build_cache,
    build_scorers,
    cache_components,
    check_spec,
    load_cache,
)
from fixgraph.pipeline.layout import Layout
from fixgraph.pipeline.stages import chunk, load_chunks
from fixgraph.retrieval.base import build_retriever


def cache_dir(cfg: DictConfig) -> Path:
    layout = Layout.from_config(cfg)
    return layout.artifacts / "candidates" / layout.corpus_name / str(cfg.split.name)


def build_candidates(cfg: DictConfig) -> CandidateCache:
    check_spec(cfg)
    split = build_split(cfg.split)
    chunk(cfg)
    layout = Layout.from_config(cfg)
    out = cache_dir(cfg)
    return build_cache(
        cfg,
        split.load(),
        split.questions_path,
        load_chunks(cfg),
        layout.chunks,
        out,
        out.parent / f".{out.name}-indexes",
    )


def open_cache(cfg: DictConfig) -> CandidateCache:
    """Load the split's cache after checking that the current config would build the same one."""
    check_spec(cfg)
    split = build_split(cfg.split)
    layout = Layout.from_config(cfg)
    channels = {str(k): build_retriever(c) for k, c in cfg.candidates.channels.items()}
    scorers = build_scorers(cfg.candidates)
    expected = cache_components(cfg, split.questions_path, layout.chunks, channels, scorers)
    return load_cache(cache_dir(cfg), expected)
