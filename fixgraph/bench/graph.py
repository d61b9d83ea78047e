"""Knowledge-graph benchmark: structural extraction time, PPR latency, LLM extraction tokens and resume.

    fixgraph bench graph experiment=graph_retrieval                      # fake LLM for the resume check
    fixgraph bench graph experiment=graph_retrieval llm=qwen_coder_05b   # the real GGUF model

- structural extraction of every chunk of the corpus (spaCy load timed apart), next to a markup-only
  run of the same extractor (noun_phrases=false) as the peer;
- PPR per query (igraph prpack, as the retrievers call it) on the HippoRAG 1 entity graph and the
  HippoRAG 2 entity+passage graph, for every question of the split, with the seeds entity linking
  found; peer: networkx's pagerank on the same graph and reset vector. Wall and CPU milliseconds
  (CPU time is what the machine's other load cannot inflate). Full `search` latency as well;
- LLM extraction on a sample of chunks in a child process, killed half-way and resumed
  (fixgraph/bench/_extraction_resume.py). Options: +bench.llm_sample=N (default 8), +bench.repeats=N.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
from omegaconf import DictConfig

from fixgraph.bench import options
from fixgraph.config import ConfigError, systems_of
from fixgraph.evaluation.splits import build_split
from fixgraph.kg.extract import ExtractionContext, build_extractor, extract_all
from fixgraph.kg.ontology import build_ontology
from fixgraph.pipeline import graph as graph_stage
from fixgraph.pipeline.stages import chunk, load_chunks, load_documents, open_system
from fixgraph.retrieval.ppr import personalized_pagerank


def _timed(fn: Any) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return 1000 * (time.perf_counter() - wall), 1000 * (time.process_time() - cpu)


def _stats(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 3), "p95": round(float(np.percentile(values, 95)), 3)}


def structural_extraction(cfg: DictConfig, repeats: int) -> dict[str, Any]:
    from fixgraph.config import compose, to_dict

    docs = {d.id: d for d in load_documents(cfg)}
    chunks = load_chunks(cfg)
    ontology = build_ontology(cfg.ontology)
    node = to_dict(cfg.extractor) if cfg.extractor.kind == "structural" else to_dict(compose([]).extractor)
    out: dict[str, Any] = {"chunks": len(chunks), "documents": len(docs)}
    for label, noun_phrases in (("full", True), ("markup_only", False)):
        extractor = build_extractor({**node, "noun_phrases": noun_phrases})
        load_s = time.perf_counter()
        extractor.prepare(ExtractionContext(documents=docs, ontology=ontology))
        load_s = time.perf_counter() - load_s
        runs, records = [], 0
        for _ in range(repeats):
            started = time.perf_counter()
            records = len(extract_all(extractor, chunks))
            runs.append(time.perf_counter() - started)
        out[label] = {
            "seconds_median": round(statistics.median(runs), 2),
            "runs": len(runs),
            "records": records,
            "model_load_seconds": round(load_s, 2),
        }
    out["full_vs_markup_only"] = round(out["full"]["seconds_median"] / out["markup_only"]["seconds_median"], 2)
    out["under_2_minutes"] = out["full"]["seconds_median"] + out["full"]["model_load_seconds"] < 120
    return out


def _reference_graph(graph: Any) -> Any:
    """The same weighted graph in networkx, parallel edges summed (as PageRank sees them)."""
    import networkx as nx

    reference = nx.Graph()
    reference.add_nodes_from(range(graph.vcount()))
    for edge in graph.es:
        a, b = edge.tuple
        weight = reference[a][b]["weight"] if reference.has_edge(a, b) else 0.0
        reference.add_edge(a, b, weight=weight + edge["weight"])
    return reference


def _ppr_system(name: str, retriever: Any, questions: list[Any]) -> dict[str, Any]:
    import networkx as nx

    graph, damping = retriever.graph, retriever.damping
    resets = []
    for q in questions:
        seeds = retriever.seeds(q.question)
        if name == "ppr_hipporag1":
            resets.append(retriever.reset_weights(seeds))
        else:
            resets.append(retriever.reset_weights(seeds, retriever.dense.scores(q.question)))
    resets = [r for r in resets if r.sum() > 0]
    personalized_pagerank(graph, resets[0], damping)  # warm-up
    timings = [_timed(lambda r=r: personalized_pagerank(graph, r, damping)) for r in resets]
    reference = _reference_graph(graph)
    peer = [
        _timed(lambda r=r: nx.pagerank(reference, alpha=damping, weight="weight", personalization=dict(enumerate(r))))[
            0
        ]
        for r in resets[:20]
    ]
    search = [_timed(lambda q=q: retriever.search(q.question, 100))[0] for q in questions]
    wall = [w for w, _ in timings]
    return {
        "nodes": graph.vcount(),
        "edges": graph.ecount(),
        "queries_with_seeds": len(resets),
        "ppr_wall_ms": _stats(wall),
        "ppr_cpu_ms": _stats([c for _, c in timings]),
        "networkx_wall_ms": _stats(peer),
        "ppr_vs_networkx": round(statistics.median(wall) / statistics.median(peer), 4),
        "search_wall_ms": _stats(search),
        "ppr_under_5ms": statistics.median(wall) < 5.0,
    }


def ppr_latency(cfg: DictConfig) -> dict[str, Any]:
    systems = systems_of(cfg)
    missing = {"ppr_hipporag1", "ppr_hipporag2"} - set(systems)
    if missing:
        raise ConfigError(f"bench graph: needs systems {sorted(missing)}; run it with experiment=graph_retrieval")
    chunk(cfg)
    chunks = load_chunks(cfg)
    questions = build_split(cfg.split).load()
    out: dict[str, Any] = {"questions": len(questions)}
    for name in ("ppr_hipporag1", "ppr_hipporag2"):
        out[name] = _ppr_system(name, open_system(cfg, name, systems[name], chunks).first_stage, questions)
    return out


def run(cfg: DictConfig) -> dict[str, Any]:
    from fixgraph.bench._extraction_resume import extraction_resume

    bench = options(cfg)
    graph_stage.build(cfg, track=False)
    result: dict[str, Any] = {"corpus": str(cfg.corpus.name)}
    result["structural_extraction"] = structural_extraction(cfg, int(bench.get("repeats", 1)))
    result["ppr"] = ppr_latency(cfg)
    result["llm_extraction"] = extraction_resume(cfg, int(bench.get("llm_sample", 8)))
    return result
