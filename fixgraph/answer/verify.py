"""Claim verification: every answer sentence checked against the chunks it cites.

For each (sentence, cited chunk) the model answers `{"supported": bool, "quote": "..."}`; a citation
supports the sentence only if the model says so AND its quote, at least `quote_min_chars` long, is
found in that chunk (rapidfuzz alignment >= `quote_min`, the same check the knowledge graph's edge
verifier uses): a model that agrees without evidence does not count.

Batched (`batch: true`, prompt `verify_answer_v1`): one call per answer checks all its pairs. The prompt
starts with the answer prompt's numbered sources, byte for byte, so llama.cpp reuses the answer call's
evaluated prefix (its KV cache) and only the checks are new input; the reply holds one verdict per
pair, in order (the schema fixes their number). Unbatched: one call per pair (`verify_claim_v1`).

A sentence is supported when at least one of its citations is; an uncited sentence is unsupported by
definition (nothing backs it). A malformed verdict (after the client's one retry) counts as "not
supported" and is tallied under its own reason.

By default the answering model verifies (under its own prompt); `answer.verify.llm` (a model config,
e.g. `+llm@answer.verify.llm=qwen_coder_15b`) gives the verifier a model of its own, like `judge.llm`:
a model checking its own claims is the weakest verifier there is.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fixgraph.answer.base import GroundedAnswer
from fixgraph.answer.prompts import load_prompt
from fixgraph.corpus.models import Chunk, numbered_sources
from fixgraph.kg.grounding import align
from fixgraph.llm.structured import StructuredOutputError

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"supported": {"type": "boolean"}, "quote": {"type": "string", "maxLength": 400}},
    "required": ["supported", "quote"],
}


@dataclass
class SentenceVerdict:
    text: str
    citations: tuple[str, ...]
    reasons: dict[str, str] = field(default_factory=dict)  # chunk id -> supported | llm_unsupported | ...
    # chunk id -> [start, end) of the verifier's quote in the chunk's text, where it was found
    quotes: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def supporting(self) -> tuple[str, ...]:
        return tuple(c for c in self.citations if self.reasons.get(c) == "supported")

    @property
    def supported(self) -> bool:
        return bool(self.supporting)


@dataclass
class Verification:
    sentences: list[SentenceVerdict] = field(default_factory=list)

    @property
    def unsupported_rate(self) -> float | None:
        n = len(self.sentences)
        return sum(not s.supported for s in self.sentences) / n if n else None

    @property
    def citation_precision(self) -> float | None:
        """Share of (sentence, citation) pairs whose chunk supports the sentence (support view)."""
        pairs = [(s, c) for s in self.sentences for c in s.citations]
        return sum(s.reasons.get(c) == "supported" for s, c in pairs) / len(pairs) if pairs else None

    @property
    def citation_recall(self) -> float | None:
        """Share of sentences backed by at least one supporting citation (ALCE's citation recall)."""
        n = len(self.sentences)
        return sum(s.supported for s in self.sentences) / n if n else None

    def reason_counts(self) -> dict[str, int]:
        counts = Counter(r for s in self.sentences for r in s.reasons.values())
        counts["uncited"] = sum(not s.citations for s in self.sentences)
        return dict(sorted(counts.items()))


def batch_schema(n: int) -> dict[str, Any]:
    """One verdict per check, exactly `n` of them (constrained decoding enforces the count)."""
    verdict = {
        "type": "object",
        "properties": {"check": {"type": "integer"}, **VERDICT_SCHEMA["properties"]},
        "required": ["check", "supported", "quote"],
    }
    return {
        "type": "object",
        "properties": {"verdicts": {"type": "array", "minItems": n, "maxItems": n, "items": verdict}},
        "required": ["verdicts"],
    }


class ClaimVerifier:
    def __init__(
        self,
        llm: Any,
        prompt: str = "verify_claim_v1",
        quote_min: float = 90.0,
        quote_min_chars: int = 8,
        max_tokens: int = 120,
        batch: bool = False,
        own_model: bool = False,
    ):
        self.llm = llm
        self.own_model = own_model  # True: not the answering model
        self.quote_min = quote_min
        self.quote_min_chars = quote_min_chars  # "the" aligns anywhere: a quote must say something
        self.max_tokens = max_tokens
        self.batch = batch
        self.template, self.prompt_version = load_prompt(prompt)
        needed = "checks" if batch else "claim"
        if needed not in self.template.template:
            raise ValueError(f"answer.verify: prompt {prompt!r} has no ${needed} (batch: {batch})")

    def reason(self, value: Mapping[str, Any], text: str) -> tuple[str, tuple[int, int] | None]:
        """(reason code of one verdict against its source text, [start, end) of its quote there if found)."""
        if not value["supported"]:
            return "llm_unsupported", None
        quote = str(value["quote"]).strip()
        if len(quote) < self.quote_min_chars:
            return "quote_too_short", None
        score, start, end = align(quote, text)
        if score < self.quote_min:
            return "quote_not_in_chunk", None
        return "supported", (start, end)

    def check_pair(self, sentence: str, text: str, answer: GroundedAnswer | None = None) -> str:
        """The reason code of one (sentence, source text) check: 'supported' or why not."""
        return self.check_span(sentence, text, answer)[0]

    def check_span(
        self, sentence: str, text: str, answer: GroundedAnswer | None = None
    ) -> tuple[str, tuple[int, int] | None]:
        """(reason code, where the supporting quote lies in `text` when it was found there)."""
        prompt = self.template.substitute(text=text, claim=sentence)
        started = time.perf_counter()
        try:
            result = self.llm.complete_json(
                prompt, VERDICT_SCHEMA, stage="verify", temperature=0.0, max_tokens=self.max_tokens
            )
        except StructuredOutputError as exc:
            if answer is not None:
                for completion in exc.completions:
                    answer.stage("verify").add(completion, 0.0)
                answer.stage("verify").seconds += time.perf_counter() - started
            return "invalid_answer", None
        if answer is not None:
            cost = answer.stage("verify")
            for completion in result.completions:
                cost.add(completion, 0.0)
            cost.seconds += time.perf_counter() - started
        return self.reason(result.value, text)

    def check_answer(
        self, answer: GroundedAnswer, chunks: Mapping[str, Chunk]
    ) -> dict[tuple[int, str], tuple[str, tuple[int, int] | None]]:
        """Every (sentence index, cited chunk) pair of an answer in one call: pair -> (reason code, quote span)."""
        pairs = [
            (i, chunk_id) for i, s in enumerate(answer.sentences) for chunk_id in s.citations if chunk_id in chunks
        ]
        if not pairs:
            return {}
        context = [chunks[c] for c in answer.context_ids]
        blocks = numbered_sources(context)
        number = {c: n for n, c in enumerate(answer.context_ids, start=1)}
        checks = "\n".join(
            f'{k}. Source [{number[c]}], claim: "{answer.sentences[i].text}"' for k, (i, c) in enumerate(pairs, start=1)
        )
        prompt = self.template.substitute(context=blocks, checks=checks)
        cost = answer.stage("verify")
        started = time.perf_counter()
        try:
            result = self.llm.complete_json(
                prompt, batch_schema(len(pairs)), stage="verify", temperature=0.0, max_tokens=self.max_tokens
            )
        except StructuredOutputError as exc:
            for completion in exc.completions:
                cost.add(completion, 0.0)
            cost.seconds += time.perf_counter() - started
            return {pair: ("invalid_answer", None) for pair in pairs}
        for completion in result.completions:
            cost.add(completion, 0.0)
        cost.seconds += time.perf_counter() - started
        verdicts = list(result.value["verdicts"])
        if len(verdicts) != len(pairs):  # a backend without constrained decoding may miscount
            return {pair: ("invalid_answer", None) for pair in pairs}
        return {(i, c): self.reason(v, chunks[c].text) for (i, c), v in zip(pairs, verdicts, strict=True)}

    def verify(self, answer: GroundedAnswer, chunks: Mapping[str, Chunk]) -> Verification:
        if self.batch:
            reasons = self.check_answer(answer, chunks)
            verification = Verification()
            for i, sentence in enumerate(answer.sentences):
                verdict = SentenceVerdict(sentence.text, sentence.citations)
                for chunk_id in sentence.citations:
                    verdict.reasons[chunk_id], span = reasons.get((i, chunk_id), ("unknown_chunk", None))
                    if span is not None:
                        verdict.quotes[chunk_id] = span
                verification.sentences.append(verdict)
            return verification
        verification = Verification()
        for sentence in answer.sentences:
            verdict = SentenceVerdict(sentence.text, sentence.citations)
            for chunk_id in sentence.citations:
                chunk = chunks.get(chunk_id)
                if chunk is None:
                    verdict.reasons[chunk_id] = "unknown_chunk"
                    continue
                verdict.reasons[chunk_id], span = self.check_span(sentence.text, chunk.text, answer)
                if span is not None:
                    verdict.quotes[chunk_id] = span
            verification.sentences.append(verdict)
        return verification


def build_verifier(settings: Mapping[str, Any] | None, answering_llm: Any) -> tuple[ClaimVerifier, bool]:
    """(verifier, enabled) from the `answer.verify` settings; with `llm` set, the verifier's own model."""
    options = dict(settings or {})
    enabled = bool(options.pop("enabled", True))
    own = options.pop("llm", None)
    if own:
        from fixgraph.llm.base import build_llm

        return ClaimVerifier(build_llm(own), own_model=True, **options), enabled
    return ClaimVerifier(answering_llm, **options), enabled
