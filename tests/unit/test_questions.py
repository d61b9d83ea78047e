"""Question files: the shared format parses; a bad line names file, line and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixgraph.evaluation.questions import QuestionFileError, load_questions
from tests.conftest import REPO

GOOD = {
    "qid": "a",
    "question": "q?",
    "qtype": "direct",
    "answerable": True,
    "gold": [{"page": "p", "quote": "text"}],
    "answer": "x",
    "key_facts": ["x"],
}


def write(tmp_path: Path, *records: object) -> Path:
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n")
    return path


def test_shared_dev_file_loads() -> None:
    questions = load_questions(REPO / "benchmarks/gnome-help/dev.jsonl")
    assert len(questions) == 115
    bridges = [q for q in questions if q.qtype == "bridge"]
    assert bridges and all(q.bridge is not None and q.answer_pages == {q.bridge.to} for q in bridges)


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        ("{not json", r"q\.jsonl:2: not valid JSON: a field name must be in double quotes.*column 2"),
        ('{"qid": "b" "question": "q?"}', r"q\.jsonl:2: not valid JSON: a comma is missing .*column 13"),
        ('{"qid": "b", "question": "q?",}', r"q\.jsonl:2: not valid JSON: a field name must be in double quotes"),
        ('{"qid": "b", "question": \'q?\'}', r"q\.jsonl:2: not valid JSON: a value is missing or not valid JSON"),
        ('{"qid": "b", "question": "q?', r"q\.jsonl:2: not valid JSON: a text value is not closed"),
        ('{"qid": "b"} {"qid": "c"}', r"q\.jsonl:2: not valid JSON: there is more after the end of the JSON object"),
        ({**GOOD, "qid": "b", "gold": [{"page": "p"}]}, r"q\.jsonl:2: field 'gold\.0\.quote': is missing"),
        ({**GOOD, "qid": "b", "question": ""}, r"q\.jsonl:2: field 'question': is empty"),
        ({**GOOD, "qid": "b", "answerable": "maybe"}, r"q\.jsonl:2: field 'answerable': must be true or false"),
        ({**GOOD, "qid": "b", "gold": "p"}, r"q\.jsonl:2: field 'gold': must be a list \[\.\.\.\], got text"),
        ({**GOOD, "qid": "b", "gold": []}, r"q\.jsonl:2: .*answerable question without gold"),
        (
            {**GOOD, "qid": "b", "gold": [{"page": "p", "url": "https://x/y", "quote": "t"}]},
            r"'page'.*or 'url'.*not both",
        ),
        ({**GOOD, "qid": "b", "gold": [{"quote": "t"}]}, r"field 'gold\.0': needs 'page' \(a document id\) or 'url'"),
        ({**GOOD, "qid": "b", "gold": [{"pgae": "p", "quote": "t"}]}, r"field 'gold\.0\.pgae': is not a known field"),
        ({**GOOD}, r"q\.jsonl:2: field 'qid': duplicate id 'a' \(first on line 1\)"),
        ([1, 2], r"q\.jsonl:2: each line must be one JSON object \{\.\.\.\}, this one is a list"),
    ],
)
def test_malformed_line_names_file_line_and_field_in_plain_words(tmp_path: Path, bad: object, expected: str) -> None:
    with pytest.raises(QuestionFileError, match=expected):
        load_questions(write(tmp_path, GOOD, bad))


def test_questions_remember_where_they_were_read(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD, "", {**GOOD, "qid": "b"})
    assert [q.source for q in load_questions(path)] == [f"{path}:1", f"{path}:3"]


def test_gold_by_url(tmp_path: Path) -> None:
    (question,) = load_questions(write(tmp_path, {**GOOD, "gold": [{"url": "https://s.example/a", "quote": "t"}]}))
    assert question.gold[0].url == "https://s.example/a" and question.gold[0].page == ""


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(QuestionFileError, match="not found"):
        load_questions(tmp_path / "absent.jsonl")


def test_committed_dev_file_is_the_shared_one() -> None:
    import hashlib

    expected = (REPO / "benchmarks/gnome-help/SHA256SUMS").read_text().split()[0]
    assert hashlib.sha256((REPO / "benchmarks/gnome-help/dev.jsonl").read_bytes()).hexdigest() == expected
