"""LLM relevance reranker: P(yes) that a passage answers the question, from any configured LLM.

Calls go through `build_llm` (the cached, usage-metered `LLMClient`, stage `rerank`).
When a backend's `Completion` carries
`top_logprobs` (token -> log-probability of the first generated token), the score is
P(yes) / (P(yes) + P(no)); otherwise it falls back to the generated text (yes -> 1, no -> 0, else 0.5),
which is what a backend without log-probabilities (and the fake LLM in tests) gives.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fixgraph.io import stable_hash
from fixgraph.llm.client import LLMClient
from fixgraph.retrieval.rerank import RERANKERS, ScorerReranker

PROMPT = (
    "You judge search results for a help-desk assistant.\n"
    "Question: {query}\n"
    "Passage: {passage}\n"
    "Does the passage help answer the question? Answer yes or no.\n"
    "Answer:"
)


def yes_probability(completion: Any) -> float:
    """P(yes) from first-token log-probabilities when the backend gives them, else from the text."""
    top: Mapping[str, float] | None = getattr(completion, "top_logprobs", None)
    if top:
        yes = [math.exp(lp) for tok, lp in top.items() if tok.strip().lower() == "yes"]
        no = [math.exp(lp) for tok, lp in top.items() if tok.strip().lower() == "no"]
        total = sum(yes) + sum(no)
        if total > 0:
            return sum(yes) / total
    words = str(completion.text).strip().lower().split()
    first = words[0].strip(".,!:;") if words else ""
    return {"yes": 1.0, "no": 0.0}.get(first, 0.5)


@RERANKERS.register("llm")
class LLMReranker(ScorerReranker):
    def __init__(
        self,
        name: str = "llm",
        llm: Any = None,
        prompt: str = PROMPT,
        top_n: int = 10,
        max_passage_chars: int = 1500,
    ) -> None:
        if llm is None:
            raise ValueError(f"reranker {name}: needs an `llm` config (e.g. llm: ${{llm}})")
        if "{query}" not in prompt or "{passage}" not in prompt:
            raise ValueError(f"reranker {name}: prompt must contain {{query}} and {{passage}}")
        self.name = name
        self.llm_cfg = llm
        # looked up at call time: a test that patches fixgraph.llm.base.build_llm must not leak into
        # this module when the reranker registry first imports it during that test
        from fixgraph.llm.base import build_llm

        self.llm: LLMClient = build_llm(llm)
        self.prompt = prompt
        self.top_n = top_n
        self.max_passage_chars = max_passage_chars

    def identity(self) -> str:
        from fixgraph.config import to_dict

        cfg = to_dict(self.llm_cfg) if not isinstance(self.llm_cfg, dict) else dict(self.llm_cfg)
        return stable_hash({"kind": "llm", "llm": cfg, "prompt": self.prompt, "chars": self.max_passage_chars})

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        scores = []
        for passage in passages:
            prompt = self.prompt.format(query=query, passage=passage[: self.max_passage_chars])
            completion = self.llm.complete(
                prompt, stage="rerank", max_tokens=1, temperature=0.0, logprobs=True, top_logprobs=10
            )
            scores.append(yes_probability(completion))
        return np.asarray(scores, dtype=np.float32)
