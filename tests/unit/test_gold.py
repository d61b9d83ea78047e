"""Gold quotes map onto every chunk they overlap, after whitespace/case/quote normalisation."""

from __future__ import annotations

import pytest

from fixgraph.corpus.models import Chunk, Document
from fixgraph.evaluation.gold import GoldCoverageError, find_spans, map_gold, normalise
from fixgraph.evaluation.questions import Question

TEXT = "Reset the hub.\nHold the “Reset” button   for fifteen seconds.\nRelease it."


def chunk(cid: str, start: int, end: int) -> Chunk:
    return Chunk(
        id=cid,
        doc_id="p",
        start=start,
        end=end,
        text=TEXT[start:end],
        title="T",
        heading_path=[],
        section="",
        n_tokens=1,
        content_hash=cid,
    )


DOC = Document(id="p", title="T", source="t", path="p", text=TEXT)
CHUNKS = [chunk("p#0", 0, 14), chunk("p#1", 15, 40), chunk("p#2", 40, len(TEXT))]


def question(*quotes: str, page: str = "p") -> Question:
    return Question(qid="q", question="?", gold=[{"page": page, "quote": q} for q in quotes])


def test_normalise_keeps_offsets() -> None:
    norm, origin = normalise("  A\u00a0 “B”\n c ")
    assert norm == 'a "b" c'
    assert len(origin) == len(norm)
    assert [("  A\u00a0 “B”\n c "[i]) for i in origin] == ["A", "\u00a0", "“", "B", "”", "\n", "c"]


def test_find_spans_is_robust_to_rendering_choices() -> None:
    spans = find_spans(TEXT, 'hold the "reset" button for')
    assert len(spans) == 1
    start, end = spans[0]
    assert TEXT[start:end] == "Hold the “Reset” button   for"


def test_quote_straddling_a_boundary_maps_to_both_chunks() -> None:
    mapping = map_gold([question("button for fifteen seconds")], [DOC], CHUNKS)
    assert mapping.items[0].chunk_ids == ["p#1", "p#2"]
    assert mapping.coverage == 1.0


def test_unmapped_quotes_are_reported_and_checked() -> None:
    mapping = map_gold([question("Reset the hub.", "not in the page"), question("x", page="nope")], [DOC], CHUNKS)
    assert [i.status for i in mapping.items] == ["mapped", "quote_not_found", "page_missing"]
    assert mapping.coverage == pytest.approx(1 / 3)
    with pytest.raises(GoldCoverageError, match=r"only 33\.3% of 3 gold quotes"):
        mapping.check(0.98)


def test_qrels_are_binary_per_chunk() -> None:
    mapping = map_gold([question("Reset the hub.", "Release it.")], [DOC], CHUNKS)
    assert mapping.qrels() == {"q": {"p#0": 1, "p#2": 1}}
