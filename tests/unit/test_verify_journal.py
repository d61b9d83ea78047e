"""Edge verification (the LLM's quote is checked by code) and the resumable extraction journal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixgraph.kg.extract import GraphRecord
from fixgraph.kg.journal import ChunkResult, ExtractionJournal, run_journaled
from fixgraph.kg.verify import EdgeVerifier, VerificationConfig
from fixgraph.llm.base import FakeLLM
from fixgraph.llm.client import LLMClient
from tests.kg_helpers import chunk, record

TEXT = "If the printer is offline, restart the computer. Open Settings to check the queue."
CHUNK = chunk(TEXT)


def _edge(subject: str, relation: str, obj: str, subject_type: str = "Cause", object_type: str = "Fix") -> GraphRecord:
    return record(subject, subject_type, CHUNK, evidence=TEXT, relation=relation, object=obj, object_type=object_type)


def test_verification_keeps_only_edges_whose_quote_code_can_find() -> None:
    edges = [
        _edge("the printer is offline", "fixed_by", "restart the computer"),
        _edge("the printer is offline", "fixed_by", "replace the toner"),
        _edge("the printer is offline", "fixed_by", "restart the computer"),
        _edge("the printer is offline", "fixed_by", "restart the computer"),
    ]
    fake = FakeLLM(
        script=[
            {"supported": True, "quote": "If the printer is offline, restart the computer."},
            {"supported": True, "quote": "If the printer is offline, replace the toner."},  # invented quote
            {"supported": False, "quote": ""},
            {"supported": True, "quote": "Open Settings to check the queue."},  # real, but not about this edge
        ]
    )
    entity = record("restart the computer", "Fix", CHUNK)
    result = EdgeVerifier(LLMClient(fake), VerificationConfig(enabled=True)).verify([entity, *edges], {CHUNK.id: CHUNK})
    assert [r.reason for r in result.rejected] == [
        "verifier_quote_not_in_text",
        "verifier_unsupported",
        "verifier_quote_misses_endpoint",
    ]
    assert result.counts() == {
        "relations_checked": 4,
        "relations_verified": 1,
        "rejected_by_reason": {
            "verifier_quote_misses_endpoint": 1,
            "verifier_quote_not_in_text": 1,
            "verifier_unsupported": 1,
        },
    }
    kept_edge = next(r for r in result.kept if r.is_relation)
    assert (kept_edge.provenance.start, kept_edge.provenance.end) == (
        0,
        len("If the printer is offline, restart the computer."),
    )
    assert entity in result.kept  # entities are not verified
    assert "--fixed_by--> restart the computer (Fix)" in fake.requests[0]["prompt"]


def test_verification_only_checks_configured_extractors() -> None:
    structural = record(
        "the printer is offline",
        "Cause",
        CHUNK,
        evidence=TEXT,
        extractor="structural",
        relation="fixed_by",
        object="restart the computer",
        object_type="Fix",
    )
    fake = FakeLLM()
    result = EdgeVerifier(LLMClient(fake), VerificationConfig(enabled=True, extractors=("llm",))).verify(
        [structural], {CHUNK.id: CHUNK}
    )
    assert result.kept == [structural] and fake.requests == []


def _records(n: int) -> list[GraphRecord]:
    return [record(f"thing {i}", "Concept", CHUNK, evidence="printer") for i in range(n)]


def test_journal_resumes_after_a_kill_without_duplicates_or_losses(tmp_path: Path) -> None:
    chunks = [chunk("printer", doc_id=f"d{i}") for i in range(6)]
    calls: list[str] = []

    def extract(c):  # type: ignore[no-untyped-def]
        calls.append(c.id)
        if len(calls) == 4 and not (tmp_path / "resumed").exists():
            raise KeyboardInterrupt  # killed while extracting the 4th chunk
        return ChunkResult(_records(2), {"input_tokens": 10, "output_tokens": 3})

    journal_path = tmp_path / "j.jsonl"
    with pytest.raises(KeyboardInterrupt):
        run_journaled(extract, chunks, ExtractionJournal(journal_path))
    with open(journal_path, "a") as fh:  # and the kill tore the line being written
        fh.write('{"chunk_id": "d3#_-0", "records": [')
    (tmp_path / "resumed").touch()
    calls.clear()
    results, resumed = run_journaled(extract, chunks, ExtractionJournal(journal_path))
    assert resumed == 3 and calls == ["d3#_-0", "d4#_-0", "d5#_-0"]
    assert list(results) == [c.id for c in chunks] and all(len(r.records) == 2 for r in results.values())
    lines = [json.loads(line) for line in journal_path.read_text().splitlines()]
    assert [entry["chunk_id"] for entry in lines] == [c.id for c in chunks]  # each chunk once, torn line gone
    assert lines[0]["usage"] == {"input_tokens": 10, "output_tokens": 3}


def test_journal_keeps_the_first_copy_of_a_duplicated_chunk(tmp_path: Path) -> None:
    journal = ExtractionJournal(tmp_path / "j.jsonl")
    journal.append("a", ChunkResult(_records(1)))
    journal.append("a", ChunkResult(_records(3)))
    journal.close()
    assert len(journal.load()["a"].records) == 1
