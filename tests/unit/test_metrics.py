"""Retrieval metrics against hand-worked values (an oracle independent of the code under test)."""

from __future__ import annotations

import math

import pytest

from fixgraph.evaluation.gold import GoldItem, GoldMapping
from fixgraph.evaluation.metrics import retrieval_metrics
from fixgraph.evaluation.questions import Question
from fixgraph.retrieval.base import Hit

DOC_OF = {"a#0": "a", "a#1": "a", "b#0": "b", "c#0": "c", "x#0": "x", "y#0": "y"}


def hits(*ids: str) -> list[Hit]:
    return [Hit(cid, 1.0 / (i + 1)) for i, cid in enumerate(ids)]


QUESTIONS = [
    Question(qid="q1", question="?", gold=[{"page": "a", "quote": "1"}, {"page": "b", "quote": "2"}]),
    Question(
        qid="q2",
        question="?",
        qtype="bridge",
        gold=[{"page": "c", "quote": "3"}, {"page": "a", "quote": "4"}],
        bridge={"from": "c", "to": "a"},
    ),
    Question(qid="q3", question="?", qtype="unanswerable", answerable=False),
]
MAPPING = GoldMapping(
    [
        GoldItem("q1", 0, "a", "1", "mapped", ["a#0", "a#1"]),  # a quote straddling two chunks
        GoldItem("q1", 1, "b", "2", "mapped", ["b#0"]),
        GoldItem("q2", 0, "c", "3", "mapped", ["c#0"]),
        GoldItem("q2", 1, "a", "4", "quote_not_found", []),
    ]
)
RANKINGS = {"q1": hits("x#0", "a#1", "y#0", "b#0"), "q2": hits("x#0", "y#0", "a#0", "c#0"), "q3": hits("x#0")}


@pytest.fixture(scope="module")
def table():  # type: ignore[no-untyped-def]
    return retrieval_metrics(QUESTIONS, MAPPING, RANKINGS, DOC_OF, ks=[1, 2, 4], ndcg_k=4)


def test_unanswerable_questions_are_not_scored(table) -> None:  # type: ignore[no-untyped-def]
    assert list(table.index) == ["q1", "q2"]


def test_recall_mrr_ndcg(table) -> None:  # type: ignore[no-untyped-def]
    q1 = table.loc["q1"]
    # q1 relevant chunks {a#0, a#1, b#0}; ranking x, a#1, y, b#0
    assert q1["recall_at_2"] == pytest.approx(1 / 3)
    assert q1["recall_at_4"] == pytest.approx(2 / 3)
    assert q1["mrr"] == pytest.approx(1 / 2)
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert q1["ndcg_at_4"] == pytest.approx(dcg / idcg)
    assert table.loc["q2", "mrr"] == pytest.approx(1 / 4)


def test_support_complete_needs_every_quote(table) -> None:  # type: ignore[no-untyped-def]
    # q1: quote 1 covered at rank 2 (a#1, its second chunk), quote 2 only at rank 4
    assert table.loc["q1", "support_complete_at_2"] == 0.0
    assert table.loc["q1", "support_complete_at_4"] == 1.0
    # q2: the unmapped quote is ignored; the mapped one (c#0) is at rank 4
    assert table.loc["q2", "support_complete_at_2"] == 0.0
    assert table.loc["q2", "support_complete_at_4"] == 1.0


def test_answer_page_is_the_bridge_target(table) -> None:  # type: ignore[no-untyped-def]
    # q2's answer page is the bridge target `a` (rank 3), not gold page `c` (rank 4)
    assert table.loc["q2", "answer_page_hit_at_2"] == 0.0
    assert table.loc["q2", "answer_page_hit_at_4"] == 1.0
    assert table.loc["q1", "answer_page_hit_at_2"] == 1.0
    assert table.loc["q1", "answer_page_hit_at_1"] == 0.0
