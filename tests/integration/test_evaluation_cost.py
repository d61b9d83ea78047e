"""`fixgraph evaluate` reports what each system costs: its index (and how many texts its build really
embedded), loading it, and LLM calls and tokens per query (issue 16), counted for the system that makes
them and no other."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from omegaconf import DictConfig

import fixgraph
from fixgraph.evaluation.cost import cost_metrics, cost_table
from fixgraph.experiment.evaluate import evaluate
from fixgraph.io import RUN_DIR
from fixgraph.pipeline.stages import load_chunks

SYSTEMS = [
    "experiment=single",
    "+retriever@systems.bm25=bm25",
    # HyDE over BM25, the passage written by the scripted LLM (3 words, one call per question)
    "+retriever@systems.hyde=hyde_mpnet",
    "systems.hyde.name=hyde",
    "retriever@systems.hyde.first_stage=bm25",
    "llm@systems.hyde.llm=fake",
    "systems.hyde.llm.default='Open the Settings'",
    # two dense indexes over the same texts: the second is built from the first one's cached vectors
    "+retriever@systems.dense=dense",
    "+retriever@systems.dense_again=dense",
    "systems.dense_again.name=dense_again",
    "tracking.enabled=false",
]


def test_costs_are_recorded_per_system_and_tokens_do_not_depend_on_the_cache(
    fixture_config: Callable[..., DictConfig], tmp_path: Path
) -> None:
    cfg = fixture_config([*SYSTEMS, "systems.hyde.llm.cache.enabled=true"])
    first = evaluate(cfg, name="cost")
    questions = first.info["questions"]
    bm25, hyde = first.info["cost"]["bm25"], first.info["cost"]["hyde"]

    assert bm25["llm_calls_per_query"] == 0 and bm25["llm_input_tokens_per_query"] == 0
    assert hyde["llm_calls_per_query"] == 1.0 and hyde["llm_output_tokens_per_query"] == 3.0
    assert hyde["llm_cached_calls_per_query"] == 0 and hyde["llm_stages"] == ["rewrite"]
    # the fake counts words: every prompt holds the template's instructions and the question
    template = (Path(fixgraph.__file__).parent / "retrieval" / "prompts" / "hyde_passage_v1.txt").read_text()
    assert hyde["llm_input_tokens_per_query"] > len(template.split())
    for cost in (bm25, hyde):
        assert cost["queries"] == questions and cost["index_status"] == "built"
        assert cost["index_mb"] > 0 and cost["index_build_s"] >= 0 and cost["load_s"] >= 0
    # a cold build embeds every chunk; a build of the same texts for another system embeds none of them
    chunks = len(load_chunks(cfg))
    dense, dense_again = first.info["cost"]["dense"], first.info["cost"]["dense_again"]
    assert (dense["index_texts_embedded"], dense["index_texts_from_cache"]) == (chunks, 0)
    assert (dense_again["index_texts_embedded"], dense_again["index_texts_from_cache"]) == (0, chunks)
    assert (bm25["index_texts_embedded"], bm25["load_texts_embedded"]) == (0, 0)

    # it differs run to run, so it lives under _run/, outside the byte-stable outputs
    assert json.loads((first.output_dir / RUN_DIR / "cost.json").read_text()) == first.info["cost"]
    assert "cost" not in json.loads((first.output_dir / "info.json").read_text())
    table = (first.output_dir / RUN_DIR / "cost.md").read_text()
    assert table == cost_table(first.info["cost"], first.info["latency"])
    assert "1.0 (0% cached)" in table and "(built)" in table
    assert f"(built; {chunks} of {chunks} texts embedded)" in table and f"(built; 0 of {chunks} texts" in table

    # again: indexes and LLM replies come from the caches; the tokens a query costs stay what they were
    again = evaluate(cfg, name="cost")
    hyde_again = again.info["cost"]["hyde"]
    assert hyde_again["llm_cached_calls_per_query"] == 1.0 and hyde_again["llm_seconds_per_query"] == 0
    assert hyde_again["llm_input_tokens_per_query"] == hyde["llm_input_tokens_per_query"]
    assert again.info["cost"]["bm25"]["index_status"] == "cached"
    assert again.info["cost"]["bm25"]["index_mb"] == bm25["index_mb"]
    # a cached index keeps what its build embedded
    assert again.info["cost"]["dense"]["index_status"] == "cached"
    assert again.info["cost"]["dense"]["index_texts_embedded"] == chunks

    metrics = cost_metrics(hyde_again)
    assert metrics["cost_llm_calls_per_query"] == 1.0 and "cost_llm_stages" not in metrics
