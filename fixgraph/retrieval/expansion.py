"""Document expansion: questions generated per chunk by the local LLM, indexed with the chunk.

doc2query (Nogueira et al. 2019) appends questions a passage answers to the passage before indexing,
so user vocabulary ("my screen goes dark") meets the manual's ("Blank screen delay"); doc2query--
(Gospodinov et al. 2023) shows that filtering bad generations matters. One LLM call per chunk asks for
`n` questions as JSON; code keeps questions of 3-40 words that are not a copy of a passage sentence,
without duplicates. Generation uses the corpus only (never benchmark questions).

Every call goes through the LLM client's SQLite cache, and each finished chunk is appended to a
journal (one fsynced JSON line), so a killed run resumes where it stopped and a rerun costs no model
time. The stage (`fixgraph expand`, fixgraph/pipeline/expansion.py) writes `expansions.parquet`;
retrievers read it through `ExpansionTexts` (`expansion:` in their config).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from fixgraph.corpus.models import Chunk
from fixgraph.io import atomic_path
from fixgraph.journal import JsonlJournal
from fixgraph.llm.structured import StructuredOutputError

WORD = re.compile(r"[a-z0-9]+")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def questions_schema(n: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "questions": {
                "type": "array",
                "items": {"type": "string", "maxLength": 300},
                "minItems": 1,
                "maxItems": n,
            }
        },
        "required": ["questions"],
    }


@dataclass(frozen=True)
class Expansion:
    chunk_id: str
    questions: list[str]
    dropped: int  # generated questions the filter removed
    prompt_version: str
    model: str
    input_tokens: int
    output_tokens: int


def _norm(text: str) -> str:
    return " ".join(WORD.findall(text.lower()))


def clean_questions(raw: Sequence[Any], chunk_text: str, n: int) -> tuple[list[str], int]:
    """Kept questions (at most `n`, first ones first) and how many were dropped: not text, 3-40 words,
    not a sentence of the passage itself, not a repeat."""
    sentences = {_norm(s) for s in SENTENCE_END.split(chunk_text)}
    kept: list[str] = []
    seen: set[str] = set()
    for item in raw:
        if not isinstance(item, str):
            continue
        question = " ".join(item.split())
        key = _norm(question)
        if not 3 <= len(question.split()) <= 40 or not key or key in seen or key in sentences:
            continue
        seen.add(key)
        kept.append(question)
    kept = kept[:n]
    return kept, len(raw) - len(kept)


class ExpansionJournal(JsonlJournal[Expansion]):
    """One fsynced JSON line per finished chunk; a torn last line (killed run) is cut off on load."""

    torn_errors = (json.JSONDecodeError, TypeError)

    def decode(self, raw: bytes) -> tuple[str, Expansion]:
        entry = Expansion(**json.loads(raw))
        return entry.chunk_id, entry

    def append(self, expansion: Expansion) -> None:
        self.write(asdict(expansion))


def expand_chunk(chunk: Chunk, llm: Any, template: Any, version: str, n: int, max_tokens: int) -> Expansion:
    """One LLM call: `n` questions the chunk answers (an unparseable answer after a retry gives none)."""
    prompt = template.substitute(n=n, heading=chunk.heading(), text=chunk.text)
    try:
        result = llm.complete_json(prompt, questions_schema(n), stage="expand", max_tokens=max_tokens)
        raw, completions = list(result.value.get("questions", [])), result.completions
    except StructuredOutputError as exc:
        raw, completions = [], exc.completions
    questions, dropped = clean_questions(raw, chunk.text, n)
    return Expansion(
        chunk_id=chunk.id,
        questions=questions,
        dropped=dropped,
        prompt_version=version,
        model=llm.identity(),
        input_tokens=sum(c.input_tokens for c in completions),
        output_tokens=sum(c.output_tokens for c in completions),
    )


def generate_expansions(
    chunks: Sequence[Chunk],
    llm: Any,
    prompt: str,
    n: int,
    max_tokens: int,
    journal: ExpansionJournal,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[Expansion], int]:
    """An expansion per chunk (in chunk order) and how many came from the journal (resumed)."""
    from fixgraph.retrieval.prompts import load_prompt

    template, version = load_prompt(prompt)
    done = journal.load()
    resumed = sum(1 for c in chunks if c.id in done)
    try:
        for i, chunk in enumerate(chunks, start=1):
            if chunk.id not in done:
                done[chunk.id] = expand_chunk(chunk, llm, template, version, n, max_tokens)
                journal.append(done[chunk.id])
            if progress is not None:
                progress(i, len(chunks))
    finally:
        journal.close()
    return [done[c.id] for c in chunks], resumed


EXPANSION_SCHEMA = pa.schema(
    [
        ("chunk_id", pa.string()),
        ("questions", pa.list_(pa.string())),
        ("dropped", pa.int64()),
        ("prompt_version", pa.string()),
        ("model", pa.string()),
        ("input_tokens", pa.int64()),
        ("output_tokens", pa.int64()),
    ]
)


def write_expansions(path: Path, expansions: Sequence[Expansion]) -> None:
    table = pa.Table.from_pylist([asdict(e) for e in expansions], schema=EXPANSION_SCHEMA)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_expansions(path: Path) -> dict[str, list[str]]:
    """chunk id -> its generated questions."""
    if not path.exists():
        raise FileNotFoundError(f"{path}: no document expansion; run `fixgraph expand` first")
    table = pq.read_table(path, columns=["chunk_id", "questions"]).to_pydict()
    return {cid: list(qs or []) for cid, qs in zip(table["chunk_id"], table["questions"], strict=True)}


def expanded_text(text: str, questions: Sequence[str]) -> str:
    """What an appending index sees: the chunk's text, then its generated questions, one per line."""
    return "\n".join([text, *questions]) if questions else text


def load_expansion(path: str | Path, chunks: Sequence[Chunk], owner: str) -> dict[str, list[str]]:
    """Generated questions of every chunk in `chunks`; an expansion made for other chunks is an error."""
    questions = read_expansions(Path(path))
    missing = [c.id for c in chunks if c.id not in questions]
    if missing:
        raise ValueError(
            f"retriever {owner}: {path} has no expansion for {len(missing)} chunks (e.g. {missing[0]}); "
            "rerun `fixgraph expand` for the current chunks"
        )
    return {c.id: questions[c.id] for c in chunks}
