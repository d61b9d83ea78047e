"""Question generation pieces with the fake LLM: sentence numbering, the concept-leak rule, evidence by
sentence number (including malformed and out-of-range replies), the feedback retry and the pass rates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixgraph.answer.qcandidates import Candidate, EvidenceSentence, number_sentences, split_sentences
from fixgraph.answer.qchecks import leaked_words, mechanical_problems, screen_problems
from fixgraph.answer.questiongen import GenerationError, check_file, generate, to_question, write_questions
from fixgraph.evaluation.questions import Question
from fixgraph.llm.base import FakeLLM
from fixgraph.llm.client import LLMClient

PAGE = "Mouse keys\nEnable mouse keys to control the pointer. Open the panel!\nClick Accessibility to open the panel."
TITLES = {"mousekeys": "Click and move the mouse pointer using the keypad", "copy": "Copy or move files and folders"}
SENTENCES = (
    EvidenceSentence("mousekeys", "Enable mouse keys to control the pointer."),
    EvidenceSentence("mousekeys", "Click Accessibility to open the panel."),
)


def candidate(kind: str = "bridge") -> Candidate:
    leak = (("mousekeys", TITLES["mousekeys"]),) if kind == "bridge" else (("answer", "Click Accessibility"),)
    bridge = {"from": "right-click", "to": "mousekeys", "link_text": "Mouse Keys"} if kind == "bridge" else None
    node = None if bridge else "Click Accessibility"
    return Candidate(kind, "right-click -> mousekeys", "PROMPT", SENTENCES, leak, bridge, node)


def reply(question: str, evidence: list[object]) -> str:
    return json.dumps(
        {"question": question, "answer": "Turn on mouse keys.", "key_facts": ["mouse keys"], "evidence": evidence}
    )


def client(*replies: str) -> tuple[LLMClient, FakeLLM]:
    fake = FakeLLM(script=list(replies))
    return LLMClient(fake, cache={"enabled": False}), fake


def test_sentences_are_verbatim_and_titles_short_lines_are_not_numbered() -> None:
    assert split_sentences(PAGE) == [
        "Mouse keys",
        "Enable mouse keys to control the pointer.",
        "Open the panel!",
        "Click Accessibility to open the panel.",
    ]
    block, numbered = number_sentences([("mousekeys", PAGE)], max_chars=1000, skip=["Mouse keys"])
    assert block == (
        "[page mousekeys]\n[1] Enable mouse keys to control the pointer.\n    Open the panel!\n"
        "[2] Click Accessibility to open the panel."
    )
    assert tuple(numbered) == SENTENCES
    _, cut = number_sentences([("mousekeys", PAGE)], max_chars=50, skip=["Mouse keys"])
    assert len(cut) == 1  # the budget stops the block


@pytest.mark.parametrize(
    ("question", "title", "leaked"),
    [
        # 3 of the title's 5 concept words (click, move, mouse, pointer, keypad): names the concept
        ("How can I use the keypad to control the mouse pointer?", TITLES["mousekeys"], ["keypad", "mous", "pointer"]),
        ("How do I control the pointer without a mouse?", TITLES["mousekeys"], []),  # 2 of 5
        ("How do I get my files back from the backup?", TITLES["copy"], []),  # 1 of 4 (copy, move, file, folder)
        ("How can I copy or move my files and folders?", TITLES["copy"], ["copi", "file", "folder", "move"]),
        ("Where do I change the keyboard layout?", "Change which language you use", []),  # generic verb only
        ("Can I switch the languages of my desktop?", "Change which language you use", ["languag"]),  # stem
    ],
)
def test_concept_leak_is_a_majority_of_the_title_words(question: str, title: str, leaked: list[str]) -> None:
    assert leaked_words(question, title) == leaked


def test_gold_quotes_are_copied_by_number_and_checked_independently() -> None:
    question = to_question(
        candidate(), {"question": "q?", "answer": "a", "key_facts": [], "evidence": [2, 2]}, "g1", "m"
    )
    assert [(g.page, g.quote) for g in question.gold] == [("mousekeys", "Click Accessibility to open the panel.")]
    for wrong in ([3], [0], []):
        with pytest.raises(GenerationError, match="numbered sentences 1-2"):
            to_question(candidate(), {"question": "q?", "answer": "a", "key_facts": [], "evidence": wrong}, "g1", "m")
    # the check does not trust the generator: a quote changed after generation is caught
    edited = Question.model_validate({**question.model_dump(), "gold": [{"page": "mousekeys", "quote": "Click it."}]})
    texts = {"mousekeys": PAGE}
    assert mechanical_problems(question, texts, {}) == []
    assert mechanical_problems(edited, texts, {}) == ["gold quote not verbatim in 'mousekeys': 'Click it.'"]


def test_failing_candidate_is_retried_once_with_the_complaint() -> None:
    llm, fake = client(
        reply("How can I use the keypad to control the mouse pointer?", [1]),  # names the concept
        reply("I cannot click with my hand, is there another way to steer?", [1]),
    )
    result = generate(llm, [candidate()], {"mousekeys": PAGE})
    assert [q.question for q in result.accepted] == ["I cannot click with my hand, is there another way to steer?"]
    assert result.accepted[0].model_extra["generated"]["attempts"] == 2  # type: ignore[index]
    second = fake.requests[1]["prompt"]
    assert second.startswith("PROMPT\n\nYour previous reply was:") and "keypad, mous, pointer" in second
    summary = result.summary()
    assert summary["kinds"]["bridge"] == {"candidates": 1, "passed_first_try": 0, "passed": 1, "pass_rate": 1.0}
    assert summary["checks"]["no_concept_leak"] == {"attempts": 2, "failed": 1}
    assert summary["checks"]["quote_verbatim"] == {"attempts": 2, "failed": 0}


@pytest.mark.parametrize(
    ("replies", "problem"),
    [
        (["{not json", "[]", "{}", "{"], "invalid output"),  # every try malformed (the client retries each)
        ([reply("Why is my pointer stuck?", [7]), reply("Why is my pointer stuck?", [9])], "evidence sentence [9]"),
        ([reply("Why is my pointer stuck?", ["1"])] * 4, "invalid output"),  # a string where a number belongs
        ([json.dumps({"question": "Why?", "answer": "x"})] * 4, "invalid output"),  # fields missing
    ],
)
def test_malformed_replies_are_rejected_with_the_reason(replies: list[str], problem: str) -> None:
    llm, _ = client(*replies)
    result = generate(llm, [candidate("path")], {"mousekeys": PAGE})
    assert result.accepted == [] and result.rejected[0]["attempts"] == 2
    assert result.rejected[0]["problems"][0].startswith(problem)
    assert result.summary()["kinds"]["path"]["passed"] == 0


def test_check_file_tests_path_questions_against_their_answer_node(tmp_path: Path) -> None:
    llm, _ = client(reply("Where do I click Accessibility?", [2]), reply("How do I open the settings?", [2]))
    result = generate(llm, [candidate("path")], {"mousekeys": PAGE})
    out = tmp_path / "q.jsonl"
    write_questions(out, result.accepted)
    assert check_file(out, {"mousekeys": PAGE}, TITLES) == {}
    record = json.loads(out.read_text())
    assert record["generated"]["answer_node"] == "Click Accessibility" and record["generated"]["attempts"] == 2
    record["question"] = "Where do I click Accessibility?"
    out.write_text(json.dumps(record) + "\n")
    assert check_file(out, {"mousekeys": PAGE}, TITLES) == {
        "gen-path-001": ["question names the concept of 'answer' ('Click Accessibility'): access, click"]
    }


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Click Accessibility to open the panel.", "question copies its evidence"),
        (
            "How do I open the panel in the desktop help manual?",
            "question refers to its source material: 'help manual'",
        ),
        ("What does the passage say about the panel?", "question refers to its source material: 'passage'"),
    ],
)
def test_screen_rejects_copied_evidence_and_source_mentions(text: str, problem: str) -> None:
    question = to_question(
        candidate(), {"question": text, "answer": "a", "key_facts": ["f"], "evidence": [2]}, "g", "m"
    )
    assert screen_problems(question, []) == [problem]
    fine = question.model_copy(update={"question": "My hand hurts when I click, is there another way?"})
    assert screen_problems(fine, []) == []
