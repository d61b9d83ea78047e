"""Ingest and chunking throughput per corpus: pages/s (parse) and chunks/s (chunking), medians of repeats.

Measures every corpus of `bench.corpora` (default: gnome_help, evolution_help, linux_man) that is
fetched; the others are listed with the command that fetches them. Parsing is `source.parse()` (for
man pages this includes the mandoc processes); chunking uses the configured chunker without its
cache, so every document is chunked. Dedup and link-graph time is reported separately. Ratios are
against the first corpus measured in the same run. Override with `+bench.corpora=[gnome_help]` and
`+bench.repeats=5`.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from omegaconf import DictConfig, OmegaConf

from fixgraph.bench import options
from fixgraph.config import build, compose
from fixgraph.corpus.chunking import CHUNKERS
from fixgraph.corpus.dedup import DedupConfig, deduplicate
from fixgraph.corpus.linkgraph import build_link_graph
from fixgraph.corpus.sources import MissingCorpusError, build_corpus

DEFAULT_CORPORA = ["gnome_help", "evolution_help", "linux_man"]


def timed(fn: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


def measure(cfg: DictConfig, repeats: int) -> dict[str, Any]:
    source = build_corpus(cfg.corpus)
    try:
        source.check()
    except MissingCorpusError:
        return {"status": f"not fetched: run `fixgraph fetch corpus={cfg.corpus.name}`"}
    chunker = build(CHUNKERS, cfg.chunker)
    parse_s, chunk_s, extra_s = [], [], []
    for _ in range(repeats):
        parsed, seconds = timed(source.parse)
        parse_s.append(seconds)
        docs = parsed.documents
        chunks, seconds = timed(lambda docs=docs: [c for d in docs for c in chunker.chunk(d)])
        chunk_s.append(seconds)
        _, seconds = timed(
            lambda parsed=parsed: build_link_graph(
                deduplicate(parsed.documents, DedupConfig.from_config(cfg.corpus.get("dedup"))).documents,
                parsed.aliases,
            )
        )
        extra_s.append(seconds)
    pages = len(parsed.documents) + sum(1 for p in parsed.problems if p.action == "skipped")
    return {
        "status": "measured",
        "pages": pages,
        "documents": len(parsed.documents),
        "chunks": len(chunks),
        "tokens": sum(c.n_tokens for c in chunks),
        "parse_s_median": round(statistics.median(parse_s), 3),
        "chunk_s_median": round(statistics.median(chunk_s), 3),
        "dedup_and_links_s_median": round(statistics.median(extra_s), 3),
        "pages_per_s": round(pages / statistics.median(parse_s), 1),
        "chunks_per_s": round(len(chunks) / statistics.median(chunk_s), 1),
    }


def run(cfg: DictConfig) -> dict[str, Any]:
    bench = options(cfg)
    names = list(bench.get("corpora", DEFAULT_CORPORA))
    repeats = int(bench.get("repeats", 3))
    shared = [f"paths.data={cfg.paths.data}", f"paths.artifacts={cfg.paths.artifacts}"]
    chunker_override = OmegaConf.to_container(cfg.chunker, resolve=True)
    assert isinstance(chunker_override, dict)
    results: dict[str, Any] = {}
    for name in names:
        corpus_cfg = compose([f"corpus={name}", *shared])
        corpus_cfg.chunker = OmegaConf.create(chunker_override)  # the chunker of the caller's config
        results[name] = measure(corpus_cfg, repeats)
    measured = [n for n in names if results[n]["status"] == "measured"]
    if measured:
        reference = results[measured[0]]
        for name in measured:
            for rate in ("pages_per_s", "chunks_per_s"):
                results[name][f"{rate}_ratio_to_{measured[0]}"] = round(results[name][rate] / reference[rate], 3)
    return {
        "chunker": {k: v for k, v in chunker_override.items() if k in ("kind", "tokenizer", "max_tokens")},
        "repeats": repeats,
        "corpora": results,
    }
