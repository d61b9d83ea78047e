"""Query expansion with the local LLM: HyDE and Query2doc (`kind: query_expansion`).

The LLM writes the help passage it expects to answer the question (HyDE, Gao et al. 2022); the first
stage then searches with the question followed by that passage (`mode: concat`, Query2doc, Wang et al.
2023) or with the passage alone (`mode: passage`, HyDE proper). A user's description of a problem
seldom uses the manual's words; the passage usually does, even when its facts are wrong, because
only its vocabulary matters for retrieval. Every call goes through the cached, usage-metered LLM
client (stage `rewrite`), so a rerun costs nothing and the tokens are counted.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fixgraph.corpus.models import Chunk
from fixgraph.retrieval.base import (
    RETRIEVERS,
    Hit,
    RecentTraces,
    build_first_stage,
    build_retriever,
    load_first_stage,
)
from fixgraph.retrieval.prompts import load_prompt

MODES = ("concat", "passage")


@RETRIEVERS.register("query_expansion")
class QueryExpansionRetriever:
    def __init__(
        self,
        name: str = "query_expansion",
        first_stage: Any = None,
        llm: Any = None,
        prompt: str = "hyde_passage_v1",
        mode: str = "concat",
        max_tokens: int = 128,
    ) -> None:
        if first_stage is None:
            raise ValueError(f"retriever {name}: needs a `first_stage` (it searches the rewritten query)")
        if llm is None:
            raise ValueError(f"retriever {name}: needs an `llm` config (e.g. llm: ${{llm}})")
        if mode not in MODES:
            raise ValueError(f"retriever {name}: unknown mode {mode!r}; valid: {', '.join(MODES)}")
        if max_tokens < 1:
            raise ValueError(f"retriever {name}: max_tokens must be >= 1, got {max_tokens}")
        self.name = name
        self.first_stage = build_retriever(first_stage)
        # looked up at call time: a test that patches fixgraph.llm.base.build_llm must not leak into
        # this module when the retriever registry first imports it during that test
        from fixgraph.llm.base import build_llm

        self.llm = build_llm(llm)
        self.template, self.prompt_version = load_prompt(prompt)
        self.mode, self.max_tokens = mode, max_tokens
        self.traces = RecentTraces()
        self.last_timings: dict[str, float] = {}

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        build_first_stage(self.first_stage, chunks, workdir)

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        load_first_stage(self.first_stage, chunks, workdir)

    def rewrite(self, query: str) -> str:
        """The text the first stage searches with (the LLM's passage is cached by prompt and model)."""
        prompt = self.template.substitute(query=query)
        completion = self.llm.complete(prompt, stage="rewrite", max_tokens=self.max_tokens, temperature=0.0)
        passage = " ".join(str(completion.text).split())
        if not passage:  # an empty generation must not turn into an empty query
            return query
        return passage if self.mode == "passage" else f"{query}\n{passage}"

    def search(self, query: str, k: int) -> list[Hit]:
        started = time.perf_counter()
        rewritten = self.rewrite(query)
        rewritten_at = time.perf_counter()
        hits = self.first_stage.search(rewritten, k)
        self.traces[query] = {"prompt": self.prompt_version, "rewritten": rewritten}
        self.last_timings = {
            **getattr(self.first_stage, "last_timings", {}),
            "rewrite_ms": 1000 * (rewritten_at - started),
        }
        return hits

    def trace(self, query: str) -> dict[str, Any]:
        return self.traces.get(query, {})
