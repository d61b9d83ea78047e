"""One System: a config built once ranks identically through the benchmark, a sweep trial, the answers
path and the candidate cache's replay (cold, then cached)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from omegaconf import DictConfig

from fixgraph.answer.run import run_answers
from fixgraph.config import systems_of
from fixgraph.experiment.evaluate import evaluate
from fixgraph.experiment.sweep_spec import build_sweep
from fixgraph.experiment.trials import load_runner
from fixgraph.pipeline.candidates import CandidateStore, Replayer, replay_rankings
from fixgraph.pipeline.stages import index, load_chunks
from fixgraph.retrieval.system import System, build_system

# weighted fusion of BM25 and dense (hashing embedder), then a bi-encoder reranker of the top 5
SYSTEM = [
    "experiment=single",
    "retriever=hybrid_weighted",
    "retriever.weights.bm25=0.4",
    "reranker=mpnet",
    "embedder@reranker.embedder=hashing",
    "reranker.top_n=5",
    "tracking.enabled=false",
]


def _trec(path: Path) -> dict[str, list[str]]:
    ranked: dict[str, list[tuple[int, str]]] = {}
    for line in path.read_text().splitlines():
        qid, _, chunk_id, rank, _, _ = line.split()
        ranked.setdefault(qid, []).append((int(rank), chunk_id))
    return {qid: [c for _, c in sorted(rows)] for qid, rows in ranked.items()}


def test_benchmark_sweep_answers_and_cache_rank_alike(protocol_config: Callable[..., DictConfig]) -> None:
    cfg = protocol_config(SYSTEM)
    ((name, system_cfg),) = systems_of(cfg).items()
    assert str(system_cfg.kind) == "reranked"  # the global reranker is attached to the system itself
    assert isinstance(build_system(system_cfg), System) and build_system(system_cfg).reranker is not None

    # 1. the benchmark: `fixgraph evaluate`, read back from its TREC run file
    result = evaluate(cfg, track=False)
    benchmark = _trec(result.output_dir / "runs" / f"{name}.trec")

    # 2. a sweep trial of the same overrides (cold: the cache runs each leaf and the scorer once)
    spec = build_sweep(protocol_config(["sweep=systems"]).sweep)
    runner = load_runner(cfg, spec, [*protocol_config.base, *SYSTEM])  # type: ignore[attr-defined]
    trial = runner.score({}, runner.compose({}))
    assert trial.stats.misses > 0 and trial.stats.path == "live"
    sweep = {qid: [h.chunk_id for h in hits] for qid, hits in trial.rankings.items()}

    # 3. the cached re-scoring path: a fresh replayer over the now-filled store runs no model
    replayer = Replayer(cfg, load_chunks(cfg), CandidateStore.of(cfg))
    replayed, stats = replay_rankings(replayer, system_cfg, runner.questions, int(cfg.evaluation.depth))
    assert stats.misses == 0 and stats.hits > 0 and stats.path == "cached"
    cached = {qid: [h.chunk_id for h in hits] for qid, hits in replayed.items()}

    # 4. the answers path (fake LLM): the ranking it answered from
    answers = run_answers(cfg, track=False)
    records = [json.loads(x) for x in (answers.output_dir / "answers.jsonl").read_text().splitlines()]
    answered = {r["qid"]: r["retrieved"] for r in records if r["system"] == name}

    assert benchmark.keys() == sweep.keys() == cached.keys()
    assert benchmark == sweep == cached
    assert answered and all(answered[qid] == benchmark[qid][: len(answered[qid])] for qid in answered)
    # the reranker really reorders: some question's top 5 differs from the first stage's
    first_stage = build_system(system_cfg.first_stage)
    first_stage.load(load_chunks(cfg), index(cfg, name, system_cfg, load_chunks(cfg)).output)
    questions = {q.qid: q.question for q in runner.questions}
    assert any([h.chunk_id for h in first_stage.search(questions[q], 5)] != benchmark[q][:5] for q in benchmark)


def test_global_reranker_cannot_stack_on_a_reranked_system(protocol_config: Callable[..., DictConfig]) -> None:
    from fixgraph.config import ConfigError

    cfg = protocol_config(["experiment=single", "retriever=hybrid_mpnet", "reranker=mpnet"])
    with pytest.raises(ConfigError, match="already has a reranker"):
        systems_of(cfg)


def test_runs_never_rewrite_the_index_stage_output(fixture_config: Callable[..., DictConfig]) -> None:
    """The `index` stage's folders are DVC outputs: a run with another config of the same system (or a
    system the stage does not build) builds under the local folder, and reuses the stage's when equal."""
    from fixgraph.pipeline.layout import Layout
    from fixgraph.pipeline.stages import chunk

    cfg = fixture_config(["experiment=single", "retriever=bm25"])
    chunk(cfg)
    chunks = load_chunks(cfg)
    system_cfg = systems_of(cfg)["bm25"]
    staged = index(cfg, "bm25", system_cfg, chunks, stage_output=True)
    layout = Layout.from_config(cfg)
    assert staged.output == layout.index_dir("bm25")
    before = (staged.output / "stage.json").read_text()

    assert index(cfg, "bm25", system_cfg, chunks).output == staged.output  # same key: the stage's index

    tuned = fixture_config(["experiment=single", "retriever=bm25", "retriever.k1=1.5"])
    other = index(tuned, "bm25", systems_of(tuned)["bm25"], chunks)
    assert other.status == "built" and other.output == layout.local_index_dir("bm25")
    assert (staged.output / "stage.json").read_text() == before
