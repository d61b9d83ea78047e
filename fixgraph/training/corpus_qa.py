"""Grounded question/answer pairs generated from the corpus by the local LLM (stage `corpus-qa`).

One call per chunk: the model reads the passage and writes a question a user could ask that the passage
answers, and a short answer from the passage alone. Code then keeps only pairs it can check:

- the question has 3-40 words and is not a sentence copied from the passage;
- the answer is supported: at least `min_support` of its content words occur in the passage (a cheap,
  deterministic grounding check; paraphrase-level hallucinations that reuse the passage's words pass);
- decontamination: a question too close to any benchmark question (`exclude_questions`, rapidfuzz
  ratio >= `max_benchmark_similarity` after normalisation) is dropped, so no dev or test question (nor a
  near-copy of one) becomes training data.

The pairs feed the bi-encoder (question -> its chunk) and the QLoRA generator (question + numbered
context -> an answer citing the chunk). Every call goes through the LLM client's SQLite cache, so a
killed run resumes where it stopped.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fixgraph.corpus.models import Chunk
from fixgraph.io import sha256_text
from fixgraph.llm.structured import StructuredOutputError
from fixgraph.training.prompts import load_prompt

log = logging.getLogger(__name__)

QA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "maxLength": 300},
        "answer": {"type": "string", "maxLength": 600},
    },
    "required": ["question", "answer"],
}
WORD = re.compile(r"[a-z0-9]+")
# words that carry no content: a grounded answer may add them freely
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "click",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "out",
        "press",
        "select",
        "so",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "this",
        "to",
        "up",
        "use",
        "want",
        "was",
        "what",
        "when",
        "where",
        "which",
        "will",
        "with",
        "you",
        "your",
        "yours",
    ]
)


@dataclass(frozen=True)
class QAPair:
    chunk_id: str
    doc_id: str
    question: str
    answer: str
    support: float  # share of the answer's content words found in the passage
    prompt_version: str
    model: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def content_words(text: str) -> list[str]:
    return [w for w in WORD.findall(text.lower()) if w not in STOPWORDS]


def support(answer: str, passage: str) -> float:
    """Share of the answer's content words that occur in the passage (0.0 for an answer without any)."""
    words = content_words(answer)
    if not words:
        return 0.0
    vocabulary = set(WORD.findall(passage.lower()))
    return sum(w in vocabulary for w in words) / len(words)


def normalise(question: str) -> str:
    return " ".join(WORD.findall(question.lower()))


def problems(
    question: str,
    answer: str,
    chunk: Chunk,
    min_support: float,
    is_benchmark_like: Callable[[str], bool],
) -> list[str]:
    """Why a generated pair is not kept (empty: keep it)."""
    found = []
    n_words = len(question.split())
    if not 3 <= n_words <= 40:
        found.append("question_length")
    if normalise(question) and f" {normalise(question)} " in f" {normalise(chunk.text)} ":  # whole words
        found.append("question_copied")
    if support(answer, chunk.index_text()) < min_support:
        found.append("answer_unsupported")
    if is_benchmark_like(question):
        found.append("benchmark_like")
    return found


def benchmark_filter(questions: Sequence[str], threshold: float) -> Callable[[str], bool]:
    """A predicate: is this question within `threshold` (rapidfuzz ratio, 0-100) of a benchmark question?"""
    from rapidfuzz import fuzz, process

    pool = [normalise(q) for q in questions]

    def close(question: str) -> bool:
        if not pool:
            return False
        match = process.extractOne(normalise(question), pool, scorer=fuzz.ratio, score_cutoff=threshold)
        return match is not None

    return close


def generate_pairs(
    chunks: Sequence[Chunk],
    llm: Any,
    prompt: str,
    min_words: int,
    min_support: float,
    max_tokens: int,
    exclude_questions: Sequence[str],
    max_benchmark_similarity: float,
    max_chunks: int | None = None,
) -> tuple[list[QAPair], dict[str, Any]]:
    """(kept pairs, summary with counts per rejection reason). Chunks shorter than `min_words` are skipped:
    a heading-only chunk answers nothing. `max_chunks` takes a uniform sample (by hash of the chunk id)."""
    template, version = load_prompt(prompt)
    is_benchmark_like = benchmark_filter(exclude_questions, max_benchmark_similarity)
    # in the order of a hash of the chunk id: the first `max_chunks` are a uniform sample of the corpus
    eligible = [c for c in sorted(chunks, key=lambda c: sha256_text(c.id)) if len(c.text.split()) >= min_words]
    if max_chunks is not None:
        eligible = eligible[:max_chunks]
    reasons: Counter[str] = Counter()
    kept: list[QAPair] = []
    model = llm.identity()

    def ask(chunk: Chunk) -> tuple[Chunk, Any]:
        text = template.substitute(heading=chunk.heading(), text=chunk.text)
        try:
            return chunk, llm.complete_json(text, QA_SCHEMA, stage="corpus_qa", temperature=0.0, max_tokens=max_tokens)
        except StructuredOutputError:
            return chunk, None

    for done, (chunk, result) in enumerate(llm.map(ask, eligible), start=1):
        if result is None:
            reasons["invalid_output"] += 1
            continue
        question, answer = str(result.value["question"]).strip(), str(result.value["answer"]).strip()
        if question and not question.endswith("?"):
            question += "?"
        found = problems(question, answer, chunk, min_support, is_benchmark_like)
        reasons.update(found)
        if not found:
            kept.append(
                QAPair(chunk.id, chunk.doc_id, question, answer, support(answer, chunk.index_text()), version, model)
            )
        if done % 25 == 0:
            log.info("corpus-qa: %d/%d chunks, %d pairs kept", done, len(eligible), len(kept))
    summary = {
        "chunks": len(chunks),
        "eligible_chunks": len(eligible),
        "kept": len(kept),
        "rejected": dict(sorted(reasons.items())),
        "prompt_version": version,
        "model": model,
        "usage": llm.usage.totals(),
    }
    return kept, summary


def read_pairs(path: Path) -> list[QAPair]:
    import json

    if not path.exists():
        raise FileNotFoundError(f"{path}: no generated Q/A pairs; run `fixgraph corpus-qa` first")
    with open(path, encoding="utf-8") as fh:
        return [QAPair(**json.loads(line)) for line in fh if line.strip()]
