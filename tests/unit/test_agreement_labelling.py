"""Judge agreement statistics (checked by hand) and the blind, resumable labelling session."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fixgraph.answer.labelling import item_id, judge_agreement, label_session, load_labels
from fixgraph.evaluation.agreement import AgreementError, agreement, ppi_mean
from fixgraph.evaluation.questions import Question

HUMAN = [0, 0.5, 1, 1, 0]
JUDGE = [0, 1, 1, 0.5, 0]


def test_agreement_by_hand() -> None:
    result = agreement(HUMAN, JUDGE)
    # observed agreement 3/5; both raters' marginals (0.4, 0.2, 0.4): chance 0.16 + 0.04 + 0.16 = 0.36
    assert result.exact == pytest.approx(0.6)
    assert result.kappa == pytest.approx((0.6 - 0.36) / (1 - 0.36))
    # linear weights 0 / 0.5 / 1: observed disagreement (0.5 + 0.5) / 5 = 0.2; expected 0.48
    assert result.kappa_linear == pytest.approx(1 - 0.2 / 0.48)
    assert result.confusion == [[2, 0, 0], [0, 0, 1], [0, 1, 1]]
    assert "linear weighted kappa 0.583" in result.markdown()


def test_agreement_refuses_bad_input() -> None:
    with pytest.raises(AgreementError, match=r"0\.7"):
        agreement([0.7], [1])
    with pytest.raises(AgreementError, match="nothing to compare"):
        agreement([], [])
    with pytest.raises(AgreementError, match="2 human labels but 1"):
        agreement([0, 1], [1])


def test_ppi_mean_corrects_the_judge_bias() -> None:
    labels = {f"l{i}": v for i, v in enumerate([0, 1, 1, 0, 1, 0])}
    grades: dict[str, float | None] = {f"l{i}": v for i, v in enumerate([0.5, 1, 1, 0.5, 1, 1])}
    grades.update({f"u{i}": v for i, v in enumerate([1, 1, 0.5, 1, 1, 0.5, 1, 1])})
    grades["u_none"] = None  # not judged: left out
    estimate = ppi_mean(labels, grades, power_tuning=False)
    assert estimate is not None
    # lambda = 1: mean of the judge on unlabelled (7/8) + mean(human - judge) on labelled (3/6 - 5/6)
    assert estimate.mean == pytest.approx(7 / 8 + (3 / 6 - 5 / 6))
    assert estimate.low < estimate.mean < estimate.high
    assert (estimate.labelled, estimate.unlabelled) == (6, 8)
    tuned = ppi_mean(labels, grades)
    assert tuned is not None and tuned.high - tuned.low <= estimate.high - estimate.low + 1e-9
    assert ppi_mean({}, grades) is None


QUESTIONS = [
    Question(qid="q1", question="How do I forget earbuds?", gold=[{"page": "a", "quote": "x"}], answer="Remove."),
    Question(
        qid="q2", question="Why no sound?", gold=[{"page": "b", "quote": "y"}], answer="Unmute.", key_facts=["unmute"]
    ),
]


def write_answers(path: Path) -> None:
    rows = [
        {"qid": q, "system": s, "answer": f"answer number {n}", "abstained": False, "judge": {"correctness": g}}
        for n, (q, s, g) in enumerate(
            [("q1", "hybrid", 1.0), ("q1", "closed_book", 0.0), ("q2", "hybrid", 0.5), ("q2", "closed_book", 0.5)]
        )
    ]
    rows.append({"qid": "q2", "system": "other", "answer": "", "abstained": True, "judge": {"correctness": 0.0}})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_labelling_is_blind_and_resumable(tmp_path: Path) -> None:
    answers, labels = tmp_path / "answers.jsonl", tmp_path / "labels.jsonl"
    write_answers(answers)
    shown: list[str] = []
    replies = iter(["maybe", "1", "s", "q"])  # invalid input is asked again; s skips; q stops

    def ask(prompt: str) -> str:
        shown.append(prompt)
        return next(replies)

    assert label_session(answers, QUESTIONS, labels, ask=ask, seed=3) == 1
    assert all("hybrid" not in p and "closed_book" not in p for p in shown)  # the system is hidden
    first = json.loads(labels.read_text().splitlines()[0])
    assert set(first) == {"item", "qid", "correctness"} and first["correctness"] == 1.0
    # a second session resumes: the labelled answer is not shown again; the abstention is never shown
    second: list[str] = []

    def ask_again(prompt: str) -> str:
        second.append(prompt)
        return "0.5"

    assert label_session(answers, QUESTIONS, labels, ask=ask_again, seed=3) == 3
    assert len(load_labels(labels)) == 4 and len(second) == 3
    assert shown[0].split("ANSWER: ")[1].split("\n")[0] not in [p.split("ANSWER: ")[1].split("\n")[0] for p in second]


def test_judge_agreement_reads_answers_and_labels(tmp_path: Path) -> None:
    answers, labels = tmp_path / "answers.jsonl", tmp_path / "labels.jsonl"
    write_answers(answers)
    human = {("q1", "hybrid"): 1.0, ("q1", "closed_book"): 0.5, ("q2", "hybrid"): 0.5}
    labels.write_text(
        "".join(json.dumps({"item": item_id(s, q), "qid": q, "correctness": v}) + "\n" for (q, s), v in human.items())
    )
    report = judge_agreement(answers, labels)
    assert report["matched"] == 3 and report["exact"] == pytest.approx(2 / 3)
    assert report["confusion"] == [[0, 0, 0], [1, 1, 0], [0, 0, 1]]
    assert report["ppi"] is not None and report["ppi"]["unlabelled"] == 1


def test_agreement_command_prints_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fixgraph.cli import main

    answers, labels = tmp_path / "answers.jsonl", tmp_path / "labels.jsonl"
    write_answers(answers)
    labels.write_text(json.dumps({"item": item_id("hybrid", "q1"), "qid": "q1", "correctness": 0.0}) + "\n")
    assert main(["agreement", "--answers", str(answers), "--labels", str(labels), "--recorded"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["matched"] == 1 and report["exact"] == 0.0 and report["confusion"][0] == [0, 0, 1]


def test_agreement_command_judges_the_graded_set_with_the_configured_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fixgraph.cli import main
    from tests.conftest import FIXTURES

    answers, labels = tmp_path / "answers.jsonl", tmp_path / "labels.jsonl"
    graded = [("a", "t-1", "Move the hub closer to the router.", 1.0), ("b", "t-1", "Restart the hub.", 0.0),
              ("a", "t-3", "Close the app.", 1.0), ("b", "t-3", "Close the hub.", 0.5)]  # fmt: skip
    answers.write_text("".join(json.dumps({"qid": q, "system": s, "answer": t, "abstained": False}) + "\n"
                               for s, q, t, _ in graded))  # fmt: skip
    labels.write_text("".join(json.dumps({"item": item_id(s, q), "correctness": g}) + "\n" for s, q, _, g in graded))
    overrides = [f"answer.graded.answers={answers}", f"answer.graded.labels={labels}",
                 f"answer.graded.questions={FIXTURES / 'questions.jsonl'}"]  # fmt: skip
    assert main(["agreement", *overrides]) == 0
    report = json.loads(capsys.readouterr().out)
    # the key-fact rules grade 1, 0, 1, 0 ("close the hub" is not "close the app"): 3 of 4 agree
    assert report["judge"].startswith("keyfacts:lexical") and report["matched"] == 4
    assert report["exact"] == pytest.approx(3 / 4) and report["confusion"] == [[1, 0, 0], [1, 0, 0], [0, 0, 2]]
    assert len(report["kappa_ci"]) == 2
    # per system (records without an llm field are labelled by system): the rules are harsher on b
    assert report["by_system"] == {
        "a": {"n": 2, "human": 1.0, "judge": 1.0},
        "b": {"n": 2, "human": 0.25, "judge": 0.0},
    }


def test_agreement_command_estimates_the_mean_over_unlabelled_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any answers file with any label file: the judge grades every answer, people a part of them, and
    the prediction-powered mean uses the judge's grades of the rest."""
    from fixgraph.cli import main
    from tests.conftest import FIXTURES

    answers, labels = tmp_path / "answers.jsonl", tmp_path / "labels.jsonl"
    graded = [("a", "t-1", "Move the hub closer to the router."), ("b", "t-1", "Restart the hub."),
              ("a", "t-3", "Close the app."), ("b", "t-3", "Close the hub."),
              ("c", "t-1", "Move the hub closer to the router."), ("c", "t-3", "Close the app.")]  # fmt: skip
    answers.write_text("".join(json.dumps({"qid": q, "system": s, "answer": t, "abstained": False}) + "\n"
                               for s, q, t in graded))  # fmt: skip
    human = {("a", "t-1"): 1.0, ("b", "t-1"): 0.0, ("a", "t-3"): 1.0, ("b", "t-3"): 0.5}
    labels.write_text(
        "".join(json.dumps({"item": item_id(s, q), "correctness": g}) + "\n" for (s, q), g in human.items())
    )
    args = ["--answers", str(answers), "--labels", str(labels), "--questions", str(FIXTURES / "questions.jsonl")]
    assert main(["agreement", *args]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["matched"] == 4
    ppi = report["ppi"]
    assert ppi is not None and ppi["labelled"] == 4 and ppi["unlabelled"] == 2
    assert ppi["low"] <= ppi["mean"] <= ppi["high"]
