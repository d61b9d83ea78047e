"""The `expand` stage: LLM-generated questions per chunk (document expansion, retrieval/expansion.py).

Output `artifacts/expansion/<corpus>/expansions.parquet` (+ `stage.json` with its key: chunks, LLM
identity, prompt version, settings, code), rebuilt only when the key changes. Generation is journaled
under `expansion.work_dir` per key, so a killed run resumes; the LLM cache makes a rerun free.
Retrievers that index expansions name this file in their `expansion:` option; the index stage hashes
the file into the index key, so new expansions rebuild those indexes.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.io import sha256_file, stable_hash
from fixgraph.llm.base import build_llm
from fixgraph.pipeline.layout import Layout
from fixgraph.pipeline.stages import StageResult, chunk, code_hash, load_chunks, run_stage
from fixgraph.retrieval.expansion import ExpansionJournal, generate_expansions, write_expansions
from fixgraph.retrieval.prompts import load_prompt

log = logging.getLogger(__name__)
FILE = "expansions.parquet"


def expansion_file(cfg: DictConfig) -> Path:
    return Path(str(cfg.expansion.output)) / FILE


def expand(cfg: DictConfig) -> StageResult:
    """Generate (or find up to date) the questions of every chunk of the configured corpus."""
    settings = cfg.expansion
    chunk(cfg)
    chunks = load_chunks(cfg)
    limit = settings.max_chunks
    chunks = chunks[: int(limit)] if limit is not None else chunks
    llm = build_llm(settings.llm)
    _, version = load_prompt(str(settings.prompt))
    key = stable_hash(
        {
            "chunks": sha256_file(Layout.from_config(cfg).chunks),
            "max_chunks": limit,
            "llm": llm.identity(),
            "prompt": version,
            "questions": int(settings.questions),
            "max_tokens": int(settings.max_tokens),
            "code": code_hash("retrieval"),
        }
    )
    journal = ExpansionJournal(Path(str(settings.work_dir)) / f"{cfg.corpus.name}-{key[:16]}.jsonl")

    def produce(out: Path) -> dict[str, Any]:
        started = time.perf_counter()

        def progress(done: int, total: int) -> None:
            if done % 25 == 0 or done == total:
                log.info("expand: %d/%d chunks (%.0fs)", done, total, time.perf_counter() - started)

        expansions, resumed = generate_expansions(
            chunks, llm, str(settings.prompt), int(settings.questions), int(settings.max_tokens), journal, progress
        )
        write_expansions(out / FILE, expansions)
        kept = [len(e.questions) for e in expansions]
        return {
            "chunks": len(expansions),
            "resumed": resumed,
            "questions": sum(kept),
            "chunks_without_questions": sum(1 for n in kept if n == 0),
            "dropped": sum(e.dropped for e in expansions),
            "prompt_version": version,
            "model": llm.identity(),
            "input_tokens": sum(e.input_tokens for e in expansions),
            "output_tokens": sum(e.output_tokens for e in expansions),
        }

    return run_stage("expand", Path(str(settings.output)), key, produce)
