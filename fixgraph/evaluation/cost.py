"""What each evaluated system costs: its index (build time, size), loading it, and per query its
latency and LLM use, so a quality gain can be weighed against what it takes to get."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tabulate import tabulate

LLM_FIELDS = ("calls", "cached_calls", "input_tokens", "output_tokens", "seconds")


def system_cost(index_cost: Mapping[str, Any], usage: Mapping[str, Mapping[str, Any]], queries: int) -> dict[str, Any]:
    """One system's record. `usage` is an LLM usage meter's totals (stage -> fields) over `queries`
    queries; LLM figures are per query, and `llm_seconds` counts only calls not answered from the cache."""
    total = {f: sum(float(stage.get(f, 0)) for stage in usage.values()) for f in LLM_FIELDS}
    per_query = max(queries, 1)
    return {
        "index_status": str(index_cost.get("status", "")),
        "index_build_s": float(index_cost.get("build_seconds", math.nan)),
        # texts the build embedded / found in the embedding cache (None: an index built before they were counted)
        "index_texts_embedded": index_cost.get("texts_embedded"),
        "index_texts_from_cache": index_cost.get("texts_from_cache"),
        "index_mb": float(index_cost.get("bytes", 0)) / 1e6,
        "load_s": float(index_cost.get("load_seconds", math.nan)),
        "load_texts_embedded": int(index_cost.get("load_texts_embedded", 0)),
        "queries": queries,
        "llm_calls_per_query": total["calls"] / per_query,
        "llm_cached_calls_per_query": total["cached_calls"] / per_query,
        "llm_input_tokens_per_query": total["input_tokens"] / per_query,
        "llm_output_tokens_per_query": total["output_tokens"] / per_query,
        "llm_seconds_per_query": total["seconds"] / per_query,
        "llm_stages": sorted(usage),
    }


def cost_metrics(cost: Mapping[str, Any]) -> dict[str, float]:
    """The numeric fields, named for MLflow (`cost_<field>`); NaN ones left out."""
    return {
        f"cost_{key}": float(value)
        for key, value in cost.items()
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(float(value))
    }


def cost_table(costs: Mapping[str, Mapping[str, Any]], latency: Mapping[str, Mapping[str, float]]) -> str:
    """Markdown: one row per system. Latency is this run's wall time per query (an LLM call answered
    from the cache costs no model time, which the cached-call column shows)."""
    rows = []
    for system, cost in costs.items():
        timed = latency.get(system, {})
        calls = cost["llm_calls_per_query"]
        rows.append(
            [
                system,
                f"{cost['index_build_s']:.1f} ({cost['index_status']}{_texts(cost)})",
                f"{cost['index_mb']:.1f}",
                f"{cost['load_s']:.1f}" + (f" ({n} embedded)" if (n := cost["load_texts_embedded"]) else ""),
                f"{timed.get('total_p50_ms', math.nan):.1f}",
                f"{timed.get('total_p95_ms', math.nan):.1f}",
                f"{calls:.1f}" + (f" ({cost['llm_cached_calls_per_query'] / calls:.0%} cached)" if calls else ""),
                f"{cost['llm_input_tokens_per_query']:.0f} + {cost['llm_output_tokens_per_query']:.0f}",
                f"{cost['llm_seconds_per_query']:.2f}",
            ]
        )
    header = [
        "system",
        "index build s",
        "index MB",
        "load s",
        "p50 ms/query",
        "p95 ms/query",
        "LLM calls/query",
        "LLM tokens/query (in + out)",
        "LLM s/query (uncached)",
    ]
    return tabulate(rows, headers=header, tablefmt="github") + "\n"


def _texts(cost: Mapping[str, Any]) -> str:
    """How much of the build was embedding: `; 612 of 612 texts embedded` (0 of N: a rebuild from cached vectors)."""
    embedded, cached = cost.get("index_texts_embedded"), cost.get("index_texts_from_cache")
    if embedded is None or cached is None or embedded + cached == 0:
        return ""
    return f"; {embedded} of {embedded + cached} texts embedded"
