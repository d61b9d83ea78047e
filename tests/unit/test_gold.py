"""Gold quotes map onto every chunk they overlap, after whitespace/case/quote normalisation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixgraph.corpus.models import Chunk, Document
from fixgraph.evaluation.gold import GoldCoverageError, UnmappedGoldError, find_spans, map_gold, normalise
from fixgraph.evaluation.questions import Question, load_questions

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
    with pytest.raises(GoldCoverageError, match=r"only 33\.3% of 3 gold quotes") as err:
        mapping.check(0.98)
    assert "another corpus" not in str(err.value)  # one missing page of three: a typo, not the wrong corpus


def test_gold_of_another_corpus_is_named_as_such() -> None:
    mapping = map_gold([question("x", page="nope"), question("y", page="gone"), question("Release it.")], [DOC], CHUNKS)
    with pytest.raises(GoldCoverageError, match=r"2 unmapped; 2 of them name pages this corpus does not have: "):
        mapping.check(0.98)


def test_qrels_are_binary_per_chunk() -> None:
    mapping = map_gold([question("Reset the hub.", "Release it.")], [DOC], CHUNKS)
    assert mapping.qrels() == {"q": {"p#0": 1, "p#2": 1}}


def test_every_unmapped_quote_is_reported_as_file_line_qid_page_reason(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "q.jsonl"
    rows = [
        {"qid": "ok", "question": "?", "gold": [{"page": "p", "quote": "Reset the hub."}]},
        {"qid": "typo", "question": "?", "gold": [{"page": "p", "quote": "Hold the Reset buton"}]},
        {"qid": "nopage", "question": "?", "gold": [{"page": "gone", "quote": "x"}]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    questions = load_questions(path)
    mapping = map_gold(questions, [DOC], CHUNKS)
    lines = mapping.report(questions)
    assert lines[0].startswith(
        f"{path}:2 typo p: quote not found in the page text (closest: 'hold the \"reset\" but', 90% similar)"
    )
    assert lines[1] == f"{path}:3 nopage gone: no document with id 'gone'"
    assert lines[2:] == [
        f"{path}:2 typo: no gold quote maps onto the corpus; not scored",
        f"{path}:3 nopage: no gold quote maps onto the corpus; not scored",
    ]
    with (
        caplog.at_level("WARNING"),
        pytest.raises(UnmappedGoldError, match=r"2 answerable question\(s\).*typo.*nopage"),
    ):
        mapping.check(0.0, questions)
    assert f"{path}:2 typo p: quote not found" in caplog.text and f"{path}:3 nopage gone" in caplog.text
    # with --allow-unmapped the two are listed, not fatal
    assert mapping.check(0.0, questions, allow_unmapped=True) == lines
    # the coverage floor still holds even when allowed
    with pytest.raises(GoldCoverageError, match=r"only 33\.3% of 3 gold quotes .*2 unmapped"):
        mapping.check(0.98, questions, allow_unmapped=True)


def test_one_unmapped_quote_of_several_keeps_the_question_scored() -> None:
    both = question("Reset the hub.", "not in the page")
    mapping = map_gold([both], [DOC], CHUNKS)
    assert mapping.unmapped_questions([both]) == []
    assert mapping.check(0.5, [both]) == ["q q p: quote not found in the page text"]


def test_gold_by_url_resolves_through_url_id_and_alias() -> None:
    site = Document(
        id="help.example.com/wifi",
        title="W",
        source="s",
        path="pages/w.html",
        url="https://help.example.com/wifi",
        text=TEXT,
        aliases=["help.example.com/old-wifi"],
    )
    chunks = [c.model_copy(update={"doc_id": site.id, "id": c.id.replace("p#", "w#")}) for c in CHUNKS]
    by_url = [
        Question(qid=f"q{i}", question="?", gold=[{"url": url, "quote": "Release it."}])
        for i, url in enumerate(
            [
                "https://help.example.com/wifi",  # the document's URL
                "HTTPS://Help.Example.com:443/wifi?utm_source=mail&cid=x#steps",  # same page, tracking noise
                "https://help.example.com/old-wifi",  # redirected address kept as an alias
                "https://help.example.com/other",
            ]
        )
    ]
    mapping = map_gold(by_url, [site], chunks)
    assert [i.page for i in mapping.items[:3]] == [site.id] * 3
    assert [i.status for i in mapping.items] == ["mapped", "mapped", "mapped", "page_missing"]
    assert mapping.items[3].reason == "no document for URL 'https://help.example.com/other'"
    assert mapping.answer_pages(by_url[2]) == {site.id}
