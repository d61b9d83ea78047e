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
        ("{not json", r"q\.jsonl:2: not valid JSON"),
        ({**GOOD, "qid": "b", "gold": [{"page": "p"}]}, r"q\.jsonl:2: field 'gold\.0\.quote'"),
        ({**GOOD, "qid": "b", "question": ""}, r"q\.jsonl:2: field 'question'"),
        ({**GOOD, "qid": "b", "gold": []}, r"q\.jsonl:2: .*answerable question without gold"),
        ({**GOOD}, r"q\.jsonl:2: field 'qid': duplicate id 'a' \(first on line 1\)"),
        ([1, 2], r"q\.jsonl:2: expected a JSON object"),
    ],
)
def test_malformed_line_names_file_line_and_field(tmp_path: Path, bad: object, expected: str) -> None:
    with pytest.raises(QuestionFileError, match=expected):
        load_questions(write(tmp_path, GOOD, bad))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(QuestionFileError, match="not found"):
        load_questions(tmp_path / "absent.jsonl")


def test_committed_dev_file_is_the_shared_one() -> None:
    import hashlib

    expected = (REPO / "benchmarks/gnome-help/SHA256SUMS").read_text().split()[0]
    assert hashlib.sha256((REPO / "benchmarks/gnome-help/dev.jsonl").read_bytes()).hexdigest() == expected
