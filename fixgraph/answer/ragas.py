"""Reference-free answer metrics in the spirit of RAGAS (Es et al. 2023), on our own verifier.

- faithfulness: share of answer sentences that the retrieved context supports, whatever they cite (a
  sentence already verified against a cited chunk counts; the rest are checked once against the whole
  context, quote found in the context by code).
- answer relevance: the model writes the question the answer responds to; cosine similarity of its
  embedding with the real question's (RAGAS generates several; one keeps the CPU cost down).
- context precision: average precision of the context ranking, a chunk counting as useful when it
  supports at least one answer sentence (verified support stands in for RAGAS's per-chunk LLM usefulness
  question, which would cost one more call per chunk).

An abstention has none of these (None: "not applicable", never 0); abstentions are counted apart.
A closed-book answer has no context: faithfulness and context precision are None, relevance is defined.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from fixgraph.answer.base import GroundedAnswer
from fixgraph.answer.prompts import load_prompt
from fixgraph.answer.verify import ClaimVerifier, Verification
from fixgraph.corpus.models import Chunk, numbered_sources
from fixgraph.llm.structured import StructuredOutputError

QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"question": {"type": "string", "maxLength": 400}},
    "required": ["question"],
}


@dataclass(frozen=True)
class RagasScores:
    faithfulness: float | None
    answer_relevance: float | None
    context_precision: float | None


def average_precision(useful: list[bool]) -> float | None:
    """AP of a ranked list with binary usefulness (mean of precision@k at each useful rank)."""
    hits, total = 0, 0.0
    for rank, flag in enumerate(useful, start=1):
        if flag:
            hits += 1
            total += hits / rank
    return total / hits if hits else (0.0 if useful else None)


class RagasMetrics:
    def __init__(
        self,
        llm: Any,
        embedder: Any,
        verifier: ClaimVerifier,
        prompt: str = "relevance_question_v1",
        max_tokens: int = 60,
    ) -> None:
        self.llm, self.embedder, self.verifier = llm, embedder, verifier
        self.max_tokens = max_tokens
        self.template, self.prompt_version = load_prompt(prompt)

    def _in_context(self, sentence: str, context: list[Chunk], answer: GroundedAnswer) -> bool:
        text = numbered_sources(context)
        return self.verifier.check_pair(sentence, text, answer) == "supported"

    def faithfulness(self, answer: GroundedAnswer, verification: Verification, chunks: Mapping[str, Chunk]) -> float:
        context = [chunks[c] for c in answer.context_ids if c in chunks]
        faithful = sum(
            verdict.supported or self._in_context(verdict.text, context, answer) for verdict in verification.sentences
        )
        return faithful / len(verification.sentences)

    def answer_relevance(self, question: str, answer: GroundedAnswer) -> float | None:
        started = time.perf_counter()
        cost = answer.stage("relevance")
        try:
            result = self.llm.complete_json(
                self.template.substitute(answer=answer.text),
                QUESTION_SCHEMA,
                stage="relevance",
                temperature=0.0,
                max_tokens=self.max_tokens,
            )
        except StructuredOutputError as exc:
            for completion in exc.completions:
                cost.add(completion, 0.0)
            cost.seconds += time.perf_counter() - started
            return None
        for completion in result.completions:
            cost.add(completion, 0.0)
        cost.seconds += time.perf_counter() - started
        vectors = self.embedder.embed_queries([question, str(result.value["question"])])
        a, b = np.asarray(vectors[0], dtype=float), np.asarray(vectors[1], dtype=float)
        denominator = float(np.linalg.norm(a) * np.linalg.norm(b))
        return float(a @ b / denominator) if denominator else 0.0

    def score(
        self, question: str, answer: GroundedAnswer, verification: Verification, chunks: Mapping[str, Chunk]
    ) -> RagasScores:
        if answer.abstained or not answer.sentences:
            return RagasScores(None, None, None)
        relevance = self.answer_relevance(question, answer)
        if not answer.context_ids:
            return RagasScores(None, relevance, None)
        supporting = {c for verdict in verification.sentences for c in verdict.supporting}
        precision = average_precision([c in supporting for c in answer.context_ids])
        return RagasScores(self.faithfulness(answer, verification, chunks), relevance, precision)
