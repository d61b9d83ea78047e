"""Per-query retrieval latency of each configured system on the configured split (medians, p95)."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
from omegaconf import DictConfig

from fixgraph.config import systems_of
from fixgraph.evaluation.splits import build_split
from fixgraph.pipeline.stages import chunk, load_chunks, open_system


def run(cfg: DictConfig) -> dict[str, Any]:
    questions = build_split(cfg.split).load()
    chunk(cfg)
    chunks = load_chunks(cfg)
    depth = int(cfg.evaluation.depth)
    systems: dict[str, Any] = {}
    for name, system_cfg in systems_of(cfg).items():
        retriever = open_system(cfg, name, system_cfg, chunks)
        retriever.search(questions[0].question, depth)  # warm-up: model load, caches
        times = []
        for question in questions:
            started = time.perf_counter()
            retriever.search(question.question, depth)
            times.append(1000 * (time.perf_counter() - started))
        systems[name] = {
            "median_ms": round(statistics.median(times), 3),
            "p95_ms": round(float(np.percentile(times, 95)), 3),
            "queries": len(times),
        }
    reference = next(iter(systems))
    for stats in systems.values():
        stats[f"ratio_to_{reference}"] = round(stats["median_ms"] / systems[reference]["median_ms"], 3)
    return {"corpus": str(cfg.corpus.name), "chunks": len(chunks), "depth": depth, "systems": systems}
