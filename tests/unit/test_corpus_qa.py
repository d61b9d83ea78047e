"""Corpus Q/A generation (training/corpus_qa.py): grounding, copy and decontamination checks, and the
generation loop against a scripted LLM."""

from __future__ import annotations

import pytest

from fixgraph.llm.base import FakeLLM
from fixgraph.llm.client import LLMClient
from fixgraph.training.corpus_qa import benchmark_filter, generate_pairs, problems, support
from tests.unit.test_distill import _chunk

PASSAGE = _chunk(
    "hub-0", "hub", "Reset the hub", [], "Hold the reset button of the hub for ten seconds with a paper clip."
)


def test_support_is_the_share_of_content_words_found_in_the_passage() -> None:
    # content words: hold, reset, button, ten, seconds (5/5); "press" and "the" are stopwords
    assert support("Press and hold the reset button for ten seconds.", PASSAGE.text) == 1.0
    # hold, reset, button, twenty, minutes: 3 of 5
    assert support("Hold the reset button for twenty minutes.", PASSAGE.text) == pytest.approx(0.6)
    assert support("", PASSAGE.text) == 0.0


def test_problems_name_each_failed_check() -> None:
    never = benchmark_filter([], 85)
    assert problems("How do I reset my hub?", "Hold the reset button for ten seconds.", PASSAGE, 0.7, never) == []
    assert problems("Hub broken?", "Hold the reset button.", PASSAGE, 0.7, never) == ["question_length"]
    copied = "Hold the reset button of the hub for ten seconds?"
    assert "question_copied" in problems(copied, "Hold it.", PASSAGE, 0.7, never)
    assert problems("How do I reset my hub?", "Call the vendor hotline.", PASSAGE, 0.7, never) == ["answer_unsupported"]
    close = benchmark_filter(["How can I reset my hub?"], 85)
    assert problems("How do I reset my hub?", "Hold the reset button for ten seconds.", PASSAGE, 0.7, close) == [
        "benchmark_like"
    ]


def test_generation_keeps_checked_pairs_and_counts_rejections() -> None:
    short = _chunk("keys-0", "keys", "Keys", [], "Super.")  # under min_words: never asked
    other = _chunk("wall-0", "wall", "Wallpaper", [], "Open Settings, choose Background and pick an image you like.")
    fake = FakeLLM(
        responses={
            "paper clip": {
                "question": "My hub froze, how do I reset it",
                "answer": "Hold the reset button for ten seconds.",
            },
            "Background": {"question": "How can I reset my hub?", "answer": "Open Settings and choose Background."},
        }
    )
    pairs, summary = generate_pairs(
        [PASSAGE, short, other], LLMClient(fake), "corpus_qa_v1", 5, 0.7, 100, ["How can I reset my hub?"], 85
    )
    assert [(p.chunk_id, p.question) for p in pairs] == [("hub-0", "My hub froze, how do I reset it?")]
    assert summary["eligible_chunks"] == 2 and summary["kept"] == 1
    assert summary["rejected"] == {"benchmark_like": 1}  # the second reply copies a benchmark question
    assert len(fake.requests) == 2 and "Reset the hub" in fake.requests[0]["prompt"] + fake.requests[1]["prompt"]
    assert pairs[0].prompt_version.startswith("corpus_qa_v1@")
