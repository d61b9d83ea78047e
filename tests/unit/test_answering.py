"""Grounded answering with the fake LLM: parsing (incl. malformed output), context budget, citation
stripping, abstention policies, closed book."""

from __future__ import annotations

import json

import pytest

from fixgraph.answer.base import ClosedBookAnswerer, GroundedAnswerer, count_tokens, pack_context
from fixgraph.answer.parsing import parse_reply
from fixgraph.corpus.models import Chunk
from fixgraph.llm.base import FakeLLM
from fixgraph.llm.client import LLMClient
from fixgraph.retrieval.base import Hit


def chunk(cid: str, text: str, title: str = "Page") -> Chunk:
    return Chunk(
        id=cid, doc_id=cid.split("#")[0], start=0, end=len(text), text=text, title=title,
        heading_path=[], section="", n_tokens=len(text.split()), content_hash=cid,
    )  # fmt: skip


CHUNKS = {
    "a#1": chunk("a#1", "Click Remove Device to forget the earbuds."),
    "b#1": chunk("b#1", "Switch Bluetooth off and on again."),
    "c#1": chunk("c#1", "Unrelated text about printers."),
}
HITS = [Hit("a#1", 3.0), Hit("b#1", 2.0), Hit("c#1", 1.0)]


def client(*replies: object, schema: bool = False) -> LLMClient:
    return LLMClient(FakeLLM(script=list(replies), supports_schema=schema), cache={"enabled": False})


def reply(*sentences: tuple[str, list[int]], abstain: bool = False) -> str:
    return json.dumps({"abstain": abstain, "sentences": [{"text": t, "citations": c} for t, c in sentences]})


def test_count_tokens_counts_words_and_punctuation() -> None:
    assert count_tokens("Click Remove, then OK.") == 6  # Click Remove , then OK .


def test_parse_json_reply() -> None:
    parsed = parse_reply(reply(("Open the panel.", [1]), ("Click Remove.", [2, 1])))
    assert parsed.format == "json" and not parsed.abstained
    assert parsed.sentences == [("Open the panel.", [1]), ("Click Remove.", [2, 1])]


def test_parse_fenced_json_reply() -> None:
    parsed = parse_reply("```json\n" + reply(("Open the panel.", [1])) + "\n```")
    assert parsed.format == "json" and parsed.sentences == [("Open the panel.", [1])]


@pytest.mark.parametrize(
    ("text", "sentences", "abstained", "fmt"),
    [
        (
            "Open the panel [1]. Click Remove [2, 3].",
            [("Open the panel.", [1]), ("Click Remove.", [2, 3])],
            False,
            "text",
        ),
        ("I don't know.", [], True, "text"),
        ("", [], True, "empty"),
        (
            '{"abstain": false, "sentences": [{"text": "Open it.", "citations": [2]}, {"text": "Cl',
            [("Open it.", [2])],
            False,
            "truncated_json",
        ),
        ('{"abstain": false, "sentences": [{"text": "Open the pan', [("Open the pan", [])], False, "truncated_json"),
        ('{"abstain": true, "sentences": [', [], True, "truncated_json"),
        ('{"sentences": "not a list"}', [], True, "invalid_json"),
    ],
)
def test_malformed_replies_fall_back(text: str, sentences: list[object], abstained: bool, fmt: str) -> None:
    parsed = parse_reply(text)
    assert (parsed.sentences, parsed.abstained, parsed.format) == (sentences, abstained, fmt)


def test_pack_context_respects_the_budget_and_skips_whole_chunks() -> None:
    # "[1] (Page)\n" + text: 6 tokens of header ([ 1 ] ( Page )) + the text's tokens
    sizes = {cid: 6 + count_tokens(c.text) for cid, c in CHUNKS.items()}
    assert sizes == {"a#1": 6 + 8, "b#1": 6 + 7, "c#1": 6 + 5}
    packed = pack_context(HITS, CHUNKS, budget=14 + 11, max_chunks=5)
    assert [c.id for c in packed] == ["a#1", "c#1"]  # b#1 (13) does not fit after a#1 (14); c#1 (11) does
    assert [c.id for c in pack_context(HITS, CHUNKS, budget=1000, max_chunks=2)] == ["a#1", "b#1"]
    assert pack_context([Hit("missing", 9.0)], CHUNKS, budget=1000, max_chunks=2) == []


def test_grounded_answer_maps_numbers_to_chunks_and_strips_out_of_context_citations() -> None:
    llm = client(reply(("Click Remove Device.", [1, 7]), ("Toggle Bluetooth.", [2, 0])))
    answer = GroundedAnswerer(max_chunks=2).answer(llm, "q1", "forget earbuds?", HITS, CHUNKS, "hybrid")
    assert [s.citations for s in answer.sentences] == [("a#1",), ("b#1",)]
    assert answer.stripped_citations == 2  # 7 and 0 point outside the two-chunk context
    assert answer.context_ids == ["a#1", "b#1"] and not answer.abstained
    prompt = llm.backend.requests[0]["prompt"]
    assert "[1] (Page)\nClick Remove Device" in prompt and "[2] (Page)\nSwitch Bluetooth" in prompt
    assert "printers" not in prompt
    assert answer.cost["answer"].calls == 1 and answer.cost["answer"].input_tokens == len(prompt.split())


def test_schema_is_sent_only_to_backends_that_constrain_decoding() -> None:
    plain, constrained = client(reply(("x.", [1]))), client(reply(("x.", [1])), schema=True)
    GroundedAnswerer().answer(plain, "q", "q?", HITS, CHUNKS, "s")
    GroundedAnswerer().answer(constrained, "q", "q?", HITS, CHUNKS, "s")
    assert "schema" not in plain.backend.requests[0] and "schema" in constrained.backend.requests[0]


def test_model_abstention_is_honoured_or_ignored_by_policy() -> None:
    said = reply(abstain=True)
    honoured = GroundedAnswerer().answer(client(said), "q", "q?", HITS, CHUNKS, "s")
    assert honoured.abstained and honoured.abstain_reason == "model" and honoured.sentences == []
    ignored = GroundedAnswerer(abstention={"model": False}).answer(
        client(json.dumps({"abstain": True, "sentences": [{"text": "Try this.", "citations": [1]}]})),
        "q", "q?", HITS, CHUNKS, "s",
    )  # fmt: skip
    assert not ignored.abstained and ignored.text == "Try this."


def test_low_retrieval_score_abstains_without_calling_the_model() -> None:
    llm = client()
    answer = GroundedAnswerer(abstention={"min_top_score": 5.0}).answer(llm, "q", "q?", HITS, CHUNKS, "s")
    assert answer.abstained and answer.abstain_reason == "low_score" and llm.backend.requests == []
    empty = GroundedAnswerer().answer(llm, "q", "q?", [], CHUNKS, "s")
    assert empty.abstained and empty.abstain_reason == "empty_context"


def test_uncited_policy_abstains_when_no_valid_citation_remains() -> None:
    llm = client(reply(("Made up.", [9])), reply(("Made up.", [9])))
    strict = GroundedAnswerer(abstention={"uncited": True}).answer(llm, "q", "q?", HITS, CHUNKS, "s")
    assert strict.abstained and strict.abstain_reason == "uncited" and strict.stripped_citations == 1
    lenient = GroundedAnswerer().answer(llm, "q", "q?", HITS, CHUNKS, "s")
    assert not lenient.abstained and lenient.sentences[0].citations == ()


def test_closed_book_sees_no_context_and_cites_nothing() -> None:
    llm = client(reply(("Open Bluetooth settings.", [1, 2])))
    answer = ClosedBookAnswerer().answer(llm, "q", "forget earbuds?", HITS, CHUNKS, "closed_book")
    prompt = llm.backend.requests[0]["prompt"]
    assert "Click Remove Device" not in prompt and "forget earbuds?" in prompt
    assert answer.sentences[0].citations == () and answer.stripped_citations == 2
    assert answer.context_ids == [] and not answer.abstained


def test_prompt_versions_are_recorded() -> None:
    answer = GroundedAnswerer().answer(client(reply(("x.", [1]))), "q", "q?", HITS, CHUNKS, "s")
    assert answer.prompt_version.startswith("answer_grounded_v1@") and len(answer.prompt_version) == 27


def test_bad_budget_is_refused() -> None:
    with pytest.raises(ValueError, match="context_tokens"):
        GroundedAnswerer(context_tokens=0)


def test_unusable_reply_is_a_failure_not_a_model_abstention() -> None:
    answer = GroundedAnswerer().answer(client('{"sentences": 3}'), "q", "q?", HITS, CHUNKS, "s")
    assert answer.abstained and answer.abstain_reason == "empty_answer" and answer.reply_format == "invalid_json"
    closed = ClosedBookAnswerer().answer(client(""), "q", "q?", HITS, CHUNKS, "s")
    assert closed.abstained and closed.abstain_reason == "empty_answer"
