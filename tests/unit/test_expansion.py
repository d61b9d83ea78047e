"""Document expansion: question filtering, the resumable journal, and BM25/dense indexing expansions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fixgraph.embedders.encoders import HashingEmbedder
from fixgraph.llm.base import FakeLLM
from fixgraph.llm.client import LLMClient
from fixgraph.pipeline.stages import index_inputs
from fixgraph.retrieval.base import build_retriever
from fixgraph.retrieval.expansion import (
    Expansion,
    ExpansionJournal,
    clean_questions,
    generate_expansions,
    read_expansions,
    write_expansions,
)
from tests.unit.conftest import toy_chunks

TEXTS = {
    "a": "Reset the hub with a paper clip. Hold the reset button for ten seconds.",
    "b": "The status light blinks amber when the router is out of reach.",
    "c": "Widgets drain their battery when the monitor app polls them.",
}
CHUNKS = toy_chunks(TEXTS)
QUESTIONS = {"a": ["my wifi box is frozen what now"], "b": ["why is the little lamp orange"], "c": []}


def _expansion_file(tmp_path: Path) -> Path:
    path = tmp_path / "expansions.parquet"
    write_expansions(path, [Expansion(cid, qs, 0, "p@1", "m", 10, 5) for cid, qs in QUESTIONS.items()])
    return path


def test_clean_questions_keeps_new_well_formed_questions_once() -> None:
    raw = [
        "How do I reset my hub?",
        "how do i reset my hub",  # the same question again
        "Reset the hub with a paper clip.",  # a sentence of the passage, not a question
        "Why?",  # too short
        42,  # not text
        "What   does the   reset button do?",
    ]
    kept, dropped = clean_questions(raw, TEXTS["a"], n=4)
    assert kept == ["How do I reset my hub?", "What does the reset button do?"]
    assert dropped == 4
    assert clean_questions(raw, TEXTS["a"], n=1) == (["How do I reset my hub?"], 5)


def test_generation_is_journaled_and_resumes_without_new_calls(tmp_path: Path) -> None:
    fake = FakeLLM(default={"questions": ["What does the light mean?", "How long do I hold it?"]})
    llm = LLMClient(fake)
    journal = ExpansionJournal(tmp_path / "j.jsonl")
    first, resumed = generate_expansions(CHUNKS[:2], llm, "expand_questions_v1", 4, 100, journal)
    assert resumed == 0 and len(fake.requests) == 2
    assert first[0].questions == ["What does the light mean?", "How long do I hold it?"]
    assert first[0].prompt_version.startswith("expand_questions_v1@")
    assert "Reset the hub with a paper clip" in fake.requests[0]["prompt"]
    # a killed run leaves a torn last line: it is cut off and only that chunk is asked again
    with open(tmp_path / "j.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"chunk_id": "c", "questions": []})[:20])
    again, resumed = generate_expansions(
        CHUNKS, llm, "expand_questions_v1", 4, 100, ExpansionJournal(tmp_path / "j.jsonl")
    )
    assert resumed == 2 and len(fake.requests) == 3
    assert [e.chunk_id for e in again] == ["a", "b", "c"]
    lines = (tmp_path / "j.jsonl").read_text().splitlines()
    assert [json.loads(line)["chunk_id"] for line in lines] == ["a", "b", "c"]


def test_an_unparseable_answer_gives_no_questions(tmp_path: Path) -> None:
    llm = LLMClient(FakeLLM(default="not json at all"))
    result, _ = generate_expansions(CHUNKS[:1], llm, "expand_questions_v1", 4, 100, ExpansionJournal(tmp_path / "j"))
    assert result[0].questions == [] and result[0].input_tokens > 0


def test_bm25_indexes_the_generated_questions(tmp_path: Path) -> None:
    path = _expansion_file(tmp_path)
    assert read_expansions(path) == QUESTIONS
    cfg = {"kind": "bm25", "name": "bm25x", "expansion": str(path)}
    plain, expanded = build_retriever({**cfg, "expansion": None}), build_retriever(cfg)
    for name, retriever in (("plain", plain), ("expanded", expanded)):
        retriever.build(CHUNKS, tmp_path / name)
        retriever.load(CHUNKS, tmp_path / name)
    assert plain.search("orange lamp", 3) == []  # no chunk says it in the manual's words
    assert [h.chunk_id for h in expanded.search("orange lamp", 3)] == ["b"]


@pytest.mark.parametrize("mode", ["append", "max"])
def test_dense_expansion_modes(tmp_path: Path, mode: str) -> None:
    path = _expansion_file(tmp_path)
    embedder_cfg = {"kind": "hashing", "name": "hashing", "dim": 256}
    retriever = build_retriever(
        {"kind": "dense", "name": "d", "embedder": embedder_cfg, "expansion": str(path), "expansion_mode": mode}
    )
    retriever.build(CHUNKS, tmp_path / mode)
    retriever.load(CHUNKS, tmp_path / mode)
    query = "why is the little lamp orange"
    embedder = HashingEmbedder(dim=256)
    q = embedder.embed_queries([query])[0]
    if mode == "append":
        texts = [c.index_text() + ("\n" + "\n".join(QUESTIONS[c.id]) if QUESTIONS[c.id] else "") for c in CHUNKS]
        expected = embedder.embed_documents(texts) @ q
    else:  # max over the chunk's own vector and each of its questions'
        expected = np.array(
            [max(float(v @ q) for v in embedder.embed_documents([c.index_text(), *QUESTIONS[c.id]])) for c in CHUNKS]
        )
    assert retriever.scores(query) == pytest.approx(expected, abs=1e-6)
    assert retriever.search(query, 1)[0].chunk_id == "b"


def test_expansion_for_other_chunks_and_bad_mode_are_errors(tmp_path: Path) -> None:
    path = tmp_path / "e.parquet"
    write_expansions(path, [Expansion("a", ["q one two"], 0, "p", "m", 1, 1)])
    retriever = build_retriever({"kind": "bm25", "name": "b", "expansion": str(path)})
    with pytest.raises(ValueError, match="no expansion for 2 chunks"):
        retriever.build(CHUNKS, tmp_path / "i")
    with pytest.raises(ValueError, match="expansion_mode"):
        build_retriever({"kind": "dense", "name": "d", "embedder": {"kind": "hashing"}, "expansion_mode": "sum"})


def test_index_key_inputs_hash_the_expansion_file_wherever_it_is_named(tmp_path: Path) -> None:
    path = _expansion_file(tmp_path)
    system = {"kind": "hybrid", "channels": {"bm25": {"kind": "bm25", "expansion": str(path)}, "d": {"kind": "dense"}}}
    before = index_inputs(system)
    assert list(before) == [str(path)] and len(before[str(path)]) == 64
    write_expansions(path, [Expansion("a", ["other question here"], 0, "p", "m", 1, 1)])
    assert index_inputs(system) != before
    assert index_inputs({"kind": "bm25", "expansion": None}) == {}
