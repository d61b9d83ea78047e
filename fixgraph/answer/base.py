"""The `answer` registry: answering systems that turn a question (and retrieved chunks) into a cited answer.

- `grounded`: the top chunks of a retriever, packed into a context budget in tokens, numbered; the
  model answers in sentences that cite those numbers. Numbers that do not refer to a chunk of the
  context are stripped (and counted): a citation can only point at text the model was shown.
- `closed_book`: the same model without any retrieval (the baseline every grounded system must beat);
  its sentences carry no citations, so the verifier counts them all unsupported.

Abstention is a policy (config `abstention`): honour the model's own "abstain", abstain without asking
when the best retrieval score is below a threshold, and/or when no sentence keeps a valid citation.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fixgraph.answer.parsing import ANSWER_SCHEMA, model_abstained, parse_reply
from fixgraph.answer.prompts import load_prompt
from fixgraph.answer.settings import RUN_KEYS
from fixgraph.corpus.models import Chunk, numbered_sources
from fixgraph.llm.usage import StageCost
from fixgraph.registry import Registry
from fixgraph.retrieval.base import Hit

TOKEN = re.compile(r"\w+|[^\w\s]")


def count_tokens(text: str) -> int:
    """Budget tokens: words and punctuation marks. BPE tokenisers (Qwen, Llama) produce about as many
    on English prose, slightly fewer on common words, so a budget in these units is a safe upper bound
    without loading the model's tokenizer."""
    return len(TOKEN.findall(text))


@dataclass(frozen=True)
class Sentence:
    text: str
    citations: tuple[str, ...] = ()  # chunk ids


@dataclass
class GroundedAnswer:
    qid: str
    system: str
    sentences: list[Sentence] = field(default_factory=list)
    abstained: bool = False
    abstain_reason: str = ""  # model | low_score | uncited | empty_context
    retrieved: list[str] = field(default_factory=list)  # the system's ranking (chunk ids), best first
    context_ids: list[str] = field(default_factory=list)  # chunk ids shown to the model, in order
    context_tokens: int = 0
    stripped_citations: int = 0  # citation numbers outside the context, removed
    reply_format: str = ""  # json | text | empty
    truncated: bool = False  # the reply stopped at max_tokens: the answer may be cut off mid-sentence
    prompt_version: str = ""
    cost: dict[str, StageCost] = field(default_factory=dict)  # stage -> tokens and time

    @property
    def text(self) -> str:
        return " ".join(s.text for s in self.sentences)

    @property
    def cited_chunks(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for s in self.sentences for c in s.citations))

    def stage(self, name: str) -> StageCost:
        return self.cost.setdefault(name, StageCost())


@dataclass
class Prepared:
    """An answer before the model is asked: `prompt` None means decided without a call (abstained)."""

    result: GroundedAnswer
    prompt: str | None
    n_context: int = 0


class Answerer(Protocol):
    name: str
    retrieves: bool  # False: closed book, no retriever is opened

    def answer(
        self, llm: Any, qid: str, question: str, hits: Sequence[Hit], chunks: Mapping[str, Chunk], system: str
    ) -> GroundedAnswer: ...

    # the three steps of `answer`, for callers that stream the model's reply (the API)
    def prepare(
        self, qid: str, question: str, hits: Sequence[Hit], chunks: Mapping[str, Chunk], system: str
    ) -> Prepared: ...

    def request(self, llm: Any) -> dict[str, Any]: ...

    def finish(self, prepared: Prepared, reply: str) -> GroundedAnswer: ...


# the `answers` run's settings (answer/settings.py RunSettings), read by answer/run.py around the answerer
RUN_SETTINGS = tuple(sorted(RUN_KEYS))
ANSWERERS: Registry[Answerer] = Registry("answer", shared=RUN_SETTINGS)


@dataclass(frozen=True)
class AbstentionPolicy:
    model: bool = True  # honour the model's own "abstain"
    min_top_score: float | None = None  # abstain without a call when the best hit scores lower
    uncited: bool = False  # abstain when no sentence keeps a valid citation

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> AbstentionPolicy:
        return cls(**dict(cfg or {}))


def pack_context(hits: Sequence[Hit], chunks: Mapping[str, Chunk], budget: int, max_chunks: int) -> list[Chunk]:
    """Chunks in rank order while they fit the budget; a chunk that does not fit is skipped, not cut,
    so that every quote the model sees is one the verifier can find in the chunk."""
    packed: list[Chunk] = []
    used = 0
    for hit in hits:
        chunk = chunks.get(hit.chunk_id)
        if chunk is None or len(packed) >= max_chunks:
            continue
        cost = count_tokens(chunk.source_block(len(packed) + 1))
        if used + cost <= budget:
            packed.append(chunk)
            used += cost
    return packed


class _Base:
    retrieves = True

    def __init__(self, name: str, prompt: str, max_tokens: int, abstention: Mapping[str, Any] | None) -> None:
        if max_tokens < 1:
            raise ValueError(f"answer {name}: max_tokens must be >= 1, got {max_tokens}")
        self.name = name
        self.max_tokens = max_tokens
        self.policy = AbstentionPolicy.from_config(abstention)
        self.template, self.prompt_version = load_prompt(prompt)

    def request(self, llm: Any) -> dict[str, Any]:
        """The generation parameters of the answer call (the schema only for backends that constrain)."""
        schema = {"schema": ANSWER_SCHEMA} if getattr(llm, "supports_schema", False) else {}
        return {"temperature": 0.0, "max_tokens": self.max_tokens, **schema}

    def answer(
        self, llm: Any, qid: str, question: str, hits: Sequence[Hit], chunks: Mapping[str, Chunk], system: str
    ) -> GroundedAnswer:
        """prepare -> one model call -> finish; streaming callers (the API) run the same three steps."""
        prepared = self.prepare(qid, question, hits, chunks, system)
        if prepared.prompt is None:
            return prepared.result
        started = time.perf_counter()
        completion = llm.complete(prepared.prompt, stage="answer", **self.request(llm))
        prepared.result.stage("answer").add(completion, time.perf_counter() - started)
        # the backend stopped because of the cap, not because the model had finished
        prepared.result.truncated = completion.output_tokens >= self.max_tokens
        return self.finish(prepared, str(completion.text))

    def prepare(
        self, qid: str, question: str, hits: Sequence[Hit], chunks: Mapping[str, Chunk], system: str
    ) -> Prepared:
        raise NotImplementedError

    def finish(self, prepared: Prepared, reply: str) -> GroundedAnswer:
        raise NotImplementedError


@ANSWERERS.register("grounded")
class GroundedAnswerer(_Base):
    def __init__(
        self,
        name: str = "grounded",
        prompt: str = "answer_grounded_v1",
        context_tokens: int = 1500,
        max_chunks: int = 8,
        max_tokens: int = 512,
        abstention: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(name, prompt, max_tokens, abstention)
        if context_tokens < 1 or max_chunks < 1:
            raise ValueError(f"answer {name}: context_tokens and max_chunks must be >= 1")
        self.context_tokens, self.max_chunks = context_tokens, max_chunks

    def prepare(
        self, qid: str, question: str, hits: Sequence[Hit], chunks: Mapping[str, Chunk], system: str
    ) -> Prepared:
        result = GroundedAnswer(qid, system, prompt_version=self.prompt_version)
        min_score = self.policy.min_top_score
        if min_score is not None and (not hits or hits[0].score < min_score):
            result.abstained, result.abstain_reason = True, "low_score"
            return Prepared(result, None)
        context = pack_context(hits, chunks, self.context_tokens, self.max_chunks)
        if not context:
            result.abstained, result.abstain_reason = True, "empty_context"
            return Prepared(result, None)
        result.context_ids = [c.id for c in context]
        blocks = numbered_sources(context)
        result.context_tokens = count_tokens(blocks)
        return Prepared(result, self.template.substitute(context=blocks, question=question), len(context))

    def finish(self, prepared: Prepared, reply: str) -> GroundedAnswer:
        result = prepared.result
        parsed = parse_reply(reply)
        result.reply_format = parsed.format
        result.truncated = result.truncated or parsed.format == "truncated_json"
        for text, numbers in parsed.sentences:
            valid = [result.context_ids[n - 1] for n in numbers if 1 <= n <= prepared.n_context]
            result.stripped_citations += len(numbers) - len(valid)
            result.sentences.append(Sentence(text, tuple(dict.fromkeys(valid))))
        if model_abstained(parsed) and self.policy.model:
            result.sentences, result.abstained, result.abstain_reason = [], True, "model"
        elif self.policy.uncited and not result.cited_chunks:
            result.sentences, result.abstained, result.abstain_reason = [], True, "uncited"
        elif not result.sentences:
            result.abstained, result.abstain_reason = True, "empty_answer"
        return result


@ANSWERERS.register("closed_book")
class ClosedBookAnswerer(_Base):
    """No retrieval: the model answers from what it learned. Citations it invents are stripped."""

    retrieves = False

    def __init__(
        self,
        name: str = "closed_book",
        prompt: str = "answer_closed_book_v1",
        max_tokens: int = 512,
        abstention: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(name, prompt, max_tokens, abstention)

    def prepare(
        self, qid: str, question: str, hits: Sequence[Hit], chunks: Mapping[str, Chunk], system: str
    ) -> Prepared:
        result = GroundedAnswer(qid, system, prompt_version=self.prompt_version)
        return Prepared(result, self.template.substitute(question=question))

    def finish(self, prepared: Prepared, reply: str) -> GroundedAnswer:
        result = prepared.result
        parsed = parse_reply(reply)
        result.reply_format = parsed.format
        result.truncated = result.truncated or parsed.format == "truncated_json"
        result.stripped_citations = sum(len(numbers) for _, numbers in parsed.sentences)
        result.sentences = [Sentence(text) for text, _ in parsed.sentences]
        said = model_abstained(parsed) and self.policy.model
        if said or not result.sentences:
            result.sentences, result.abstained = [], True
            result.abstain_reason = "model" if said else "empty_answer"
        return result


def build_answerer(cfg: Any) -> Answerer:
    """The answering system of an `answer` option; its run settings (`answer.settings.RunSettings`:
    systems, sample, verifier...) are the run's, every other key must be the answerer's."""
    from fixgraph.answer.settings import answerer_fields
    from fixgraph.config import build

    return build(ANSWERERS, answerer_fields(cfg))
