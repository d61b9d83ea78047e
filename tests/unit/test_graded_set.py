"""Label files with covered facts, the graded set's answers file, judge agreement with kappa CIs and fact
agreement, the verifier against hand-checked claims, batched verification, truncation, strict settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from fixgraph.answer.base import GroundedAnswer, GroundedAnswerer, Sentence
from fixgraph.answer.labelling import (
    Label,
    LabelFileError,
    add_answers,
    agreement_report,
    item_id,
    label_session,
    load_labels,
    parse_reply,
)
from fixgraph.answer.measure import claim_key, verifier_agreement
from fixgraph.answer.settings import RunSettings
from fixgraph.answer.verify import ClaimVerifier
from fixgraph.config import ConfigError, compose
from fixgraph.evaluation.agreement import binary_agreement, kappa_interval, resampled_kappas
from fixgraph.evaluation.judge import Judgement
from fixgraph.evaluation.questions import Question
from fixgraph.llm.base import Completion, FakeLLM
from fixgraph.llm.client import LLMClient
from fixgraph.llm.usage import StageCost
from tests.unit.test_answering import CHUNKS, HITS, reply


def test_reply_parsing_takes_a_grade_and_covered_facts() -> None:
    assert parse_reply("0.5 1,3", 3) == (0.5, (1, 3))
    assert parse_reply("1", 3) == (1.0, None)  # facts not recorded
    assert parse_reply("0 -", 3) == (0.0, ())  # recorded: none
    assert parse_reply("1 3 1", 3) == (1.0, (1, 3))
    for bad in ("0.7", "1 4", "x", "", "1 a"):
        assert parse_reply(bad, 3) is None


QUESTIONS = [
    Question(qid="q1", question="Forget earbuds?", gold=[{"page": "a", "quote": "x"}], answer="Remove.",
             key_facts=["open Bluetooth", "click Remove Device"]),
]  # fmt: skip


def test_label_session_records_covered_facts_blind(tmp_path: Path) -> None:
    answers, labels = tmp_path / "answers.jsonl", tmp_path / "labels.jsonl"
    rows = [
        {"item": "it-a", "qid": "q1", "system": "dense", "answer": "Open Bluetooth.", "abstained": False},
        {"qid": "q1", "system": "closed_book", "answer": "Reboot.", "abstained": False},
    ]
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    shown: list[str] = []
    replies = {"Open Bluetooth.": iter(["0.5 1,9", "0.5 1"]), "Reboot.": iter(["0 -"])}  # fact 9: asked again

    def ask(prompt: str) -> str:
        shown.append(prompt)
        return next(replies[prompt.split("ANSWER: ")[1].split("\n")[0]])

    assert label_session(answers, QUESTIONS, labels, ask=ask, seed=1) == 2
    assert len(shown) == 3 and "  1. open Bluetooth\n  2. click Remove Device" in shown[0]
    assert all("dense" not in p and "closed_book" not in p for p in shown)
    closed = item_id("closed_book", "q1")  # no item field: the (system, qid) hash
    assert load_labels(labels) == {"it-a": Label("it-a", 0.5, (1,), "q1"), closed: Label(closed, 0.0, (), "q1")}


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"item": "a"}', "needs 'item' and 'correctness'"),
        ('{"item": "a", "correctness": 0.7}', "is not one of"),
        ('{"item": "a", "correctness": 1, "covered": "1,2"}', "covered must be a list"),
        ("not json", "not valid JSON"),
    ],
)
def test_bad_label_lines_are_named(tmp_path: Path, line: str, problem: str) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"item": "ok", "correctness": 1}\n' + line + "\n")
    with pytest.raises(LabelFileError, match=rf"labels.jsonl:2: .*{problem}"):
        load_labels(path)


def test_add_answers_builds_a_judge_free_graded_set(tmp_path: Path) -> None:
    run = tmp_path / "answers.jsonl"
    record = {
        "item": "x1", "qid": "q1", "system": "dense", "llm": "qwen_coder_15b", "question": "?", "answer": "A.",
        "abstained": False, "truncated": False, "context_ids": ["a#1"], "judge": {"correctness": 1},
        "cost": {"answer": {}}, "sentences": [{"text": "A.", "citations": ["a#1"], "verdicts": {"a#1": "supported"}}],
    }  # fmt: skip
    abstained = {**record, "item": "x2", "abstained": True}
    run.write_text(json.dumps(record) + "\n" + json.dumps(abstained) + "\n")
    graded = tmp_path / "graded" / "answers.jsonl"
    assert add_answers(graded, [run]) == 1 and add_answers(graded, [run]) == 0  # abstention skipped, no duplicate
    stored = json.loads(graded.read_text())
    assert "judge" not in stored and "cost" not in stored
    assert stored["sentences"] == [{"text": "A.", "citations": ["a#1"]}] and stored["llm"] == "qwen_coder_15b"


def test_kappa_interval_brackets_the_sklearn_estimate() -> None:
    rng = np.random.default_rng(3)
    human = rng.choice([0.0, 0.5, 1.0], 120)
    judge = np.where(rng.random(120) < 0.7, human, rng.choice([0.0, 0.5, 1.0], 120))
    point = cohen_kappa_score((human * 2).astype(int), (judge * 2).astype(int))
    interval = kappa_interval(human.tolist(), judge.tolist(), resamples=500, seed=0)
    assert interval.low < point < interval.high and interval.resamples == 500
    assert 0.2 < interval.high - interval.low < 0.4  # ~ 2 * 1.96 * sqrt(k(1-k)/n)-ish at n = 120
    perfect = kappa_interval([0.0, 1.0] * 20, [0.0, 1.0] * 20, resamples=200)
    assert (perfect.low, perfect.high) == (1.0, 1.0)


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_resampled_kappas_are_sklearns_to_the_bit(weights: str | None) -> None:
    rng = np.random.default_rng(7)
    human = rng.integers(0, 3, (200, 25))
    judge = np.where(rng.random((200, 25)) < 0.6, human, rng.integers(0, 3, (200, 25)))
    human[:3], judge[:3] = 1, 1  # one class on both sides: undefined
    judge[3:6] = 2  # one class on the judge's side only: defined
    ours = resampled_kappas(human, judge, weights)
    assert np.isnan(ours[:3]).all()
    for h, j, value in zip(human[3:], judge[3:], ours[3:], strict=True):
        assert value == cohen_kappa_score(h, j, labels=[0, 1, 2], weights=weights)


def test_kappa_interval_resamples_as_one_sklearn_call_per_resample_would() -> None:
    rng = np.random.default_rng(5)
    human = rng.choice([0.0, 0.5, 1.0], 33)
    judge = np.where(rng.random(33) < 0.5, human, rng.choice([0.0, 0.5, 1.0], 33))
    h, j = (human * 2).astype(int), (judge * 2).astype(int)
    draws = np.random.default_rng(11)
    values = []
    for _ in range(300):
        idx = draws.integers(0, 33, 33)
        if len(set(h[idx]) | set(j[idx])) > 1:
            values.append(cohen_kappa_score(h[idx], j[idx], labels=[0, 1, 2], weights="linear"))
    interval = kappa_interval(human.tolist(), judge.tolist(), "linear", 0.9, resamples=300, seed=11)
    assert (interval.low, interval.high) == tuple(np.percentile(values, [5.0, 95.0]))
    assert interval.resamples == len(values)
    none = kappa_interval(human.tolist(), judge.tolist(), resamples=0)
    assert np.isnan(none.low) and np.isnan(none.high) and none.resamples == 0


def test_binary_agreement_by_hand() -> None:
    human = [True, True, False, False, True]
    predicted = [True, False, False, True, True]
    result = binary_agreement(human, predicted)
    # tp 2, fn 1, fp 1, tn 1: precision 2/3, recall 2/3; p_o 3/5, p_e 0.6*0.6 + 0.4*0.4 = 0.52
    assert result.confusion == [[1, 1], [1, 2]]
    assert result.precision == pytest.approx(2 / 3) and result.recall == pytest.approx(2 / 3)
    assert result.kappa == pytest.approx((0.6 - 0.52) / (1 - 0.52))


def test_agreement_report_includes_fact_agreement() -> None:
    labels = {
        "a": Label("a", 1.0, (1, 2)),
        "b": Label("b", 0.5, (1,)),
        "c": Label("c", 0.0, ()),
        "d": Label("d", 0.0),  # facts not recorded: in the grade agreement only
    }
    judgements = {
        "a": Judgement(1.0, 1.0, covered=(1, 2), n_facts=2),
        "b": Judgement(1.0, 1.0, covered=(1, 2), n_facts=2),
        "c": Judgement(0.0, 0.0, covered=(), n_facts=2),
        "d": Judgement(0.5, 0.5, covered=(1,), n_facts=2),
        "e": Judgement(1.0, 1.0, covered=(1,), n_facts=2),  # unlabelled: PPI only
    }
    report = agreement_report(labels, judgements, resamples=200)
    assert report["matched"] == 4 and report["exact"] == pytest.approx(2 / 4)
    # facts of a, b, c: human [T, T, T, F, F, F], judge [T, T, T, T, F, F]: one false positive
    assert report["facts"]["confusion"] == [[2, 1], [0, 3]] and report["facts"]["recall"] == 1.0
    assert report["ppi"]["unlabelled"] == 1
    low, high = report["kappa_ci"]
    assert low <= report["kappa"] <= high


def answers_with_verdicts(path: Path) -> None:
    record: dict[str, Any] = {
        "item": "i1", "qid": "q1", "system": "dense", "answer": "A. B.", "abstained": False,
        "sentences": [
            {"text": "A.", "citations": ["a#1", "b#1"], "verdicts": {"a#1": "supported", "b#1": "llm_unsupported"}},
            {"text": "B.", "citations": ["c#1"], "verdicts": {"c#1": "quote_not_in_chunk"}},
        ],
    }  # fmt: skip
    path.write_text(json.dumps(record) + "\n")


def test_verifier_agreement_with_hand_checked_claims(tmp_path: Path) -> None:
    answers, claims = tmp_path / "answers.jsonl", tmp_path / "claims.jsonl"
    answers_with_verdicts(answers)
    hand = {claim_key("i1", 0, "a#1"): True, claim_key("i1", 0, "b#1"): True, claim_key("i1", 1, "c#1"): True}
    claims.write_text("".join(json.dumps({"claim": k, "supported": v}) + "\n" for k, v in hand.items()))
    report = verifier_agreement(claims, answers)
    # verifier says supported for 1 of 3 pairs; the person for all 3
    assert report["matched"] == 3 and report["recall"] == pytest.approx(1 / 3) and report["precision"] == 1.0
    # sentence A is supported either way (one citation); sentence B only by the person
    assert report["unsupported_rate_verifier"] == 0.5 and report["unsupported_rate_human"] == 0.0
    claims.write_text(json.dumps({"claim": "other:0:x", "supported": False}) + "\n")
    with pytest.raises(LabelFileError, match="none of the 1 claims"):
        verifier_agreement(claims, answers)


def client(*replies: object, schema: bool = False) -> LLMClient:
    return LLMClient(FakeLLM(script=list(replies), supports_schema=schema), cache={"enabled": False})


def verdicts(*items: tuple[bool, str]) -> str:
    return json.dumps({"verdicts": [{"check": i, "supported": s, "quote": q} for i, (s, q) in enumerate(items, 1)]})


def test_batched_verification_shares_the_answer_prompt_prefix() -> None:
    llm = client(
        reply(("Click Remove Device.", [1, 2]), ("Toggle it.", [2]), ("No source.", [])),
        verdicts((True, "Click Remove Device"), (False, ""), (True, "the")),
    )
    answerer = GroundedAnswerer(prompt="answer_grounded_v2", max_chunks=2)
    answer = answerer.answer(llm, "q1", "forget?", HITS, CHUNKS, "dense")
    verifier = ClaimVerifier(llm, prompt="verify_answer_v1", batch=True)
    result = verifier.verify(answer, CHUNKS)
    answer_prompt, verify_prompt = (r["prompt"] for r in llm.backend.requests)
    sources = answer_prompt[: answer_prompt.index("\n\nYou answer questions")]
    assert sources.startswith("Sources:\n[1] (Page)\nClick Remove Device") and verify_prompt.startswith(sources)
    assert '1. Source [1], claim: "Click Remove Device."' in verify_prompt
    assert '3. Source [2], claim: "Toggle it."' in verify_prompt
    # pair 3's quote "the" is too short to be evidence (quote_min_chars 8)
    assert [s.reasons for s in result.sentences] == [
        {"a#1": "supported", "b#1": "llm_unsupported"},
        {"b#1": "quote_too_short"},
        {},
    ]
    assert answer.cost["verify"].calls == 1


def test_batched_verification_with_the_wrong_number_of_verdicts_is_invalid() -> None:
    answer = GroundedAnswer("q", "s", [Sentence("A.", ("a#1",)), Sentence("B.", ("b#1",))], context_ids=["a#1", "b#1"])
    one = verdicts((True, "Click Remove Device"))
    result = ClaimVerifier(client(one, one), prompt="verify_answer_v1", batch=True).verify(answer, CHUNKS)
    assert [s.reasons for s in result.sentences] == [{"a#1": "invalid_answer"}, {"b#1": "invalid_answer"}]
    with pytest.raises(ValueError, match=r"has no \$checks"):
        ClaimVerifier(client(), prompt="verify_claim_v1", batch=True)


def test_an_answer_cut_at_max_tokens_is_flagged() -> None:
    long_reply = reply(("One two three four five six seven eight nine ten.", [1]))
    cut = GroundedAnswerer(max_tokens=5).answer(client(long_reply), "q", "q?", HITS, CHUNKS, "s")
    whole = GroundedAnswerer(max_tokens=500).answer(client(long_reply), "q", "q?", HITS, CHUNKS, "s")
    assert cut.truncated and not whole.truncated  # the fake counts output tokens as words
    partial = '{"abstain": false, "sentences": [{"text": "Open it.", "citations": [1]}, {"text": "Then cl'
    assert GroundedAnswerer(max_tokens=500).answer(client(partial), "q", "q?", HITS, CHUNKS, "s").truncated


def test_stage_cost_keeps_the_model_time_of_cached_calls() -> None:
    cost = StageCost()
    cost.add(Completion("x", 10, 5, 12.5), 12.6)
    cost.add(Completion("x", 10, 5, 12.5, cached=True), 0.001)
    assert cost.model_seconds == 25.0 and cost.cached_calls == 1 and cost.seconds == pytest.approx(12.601)


def test_answer_settings_are_strict() -> None:
    with pytest.raises(ConfigError, match=r"unknown key\(s\) budget"):
        from fixgraph.answer.base import build_answerer

        build_answerer(compose(["+answer.budget=3"]).answer)
    with pytest.raises(ConfigError, match=r"answer.guard: unknown key\(s\) min_kapa"):
        RunSettings.from_config(compose(["+answer.guard.min_kapa=0.5"]).answer)
    settings = RunSettings.from_config(compose(["answer.max_questions=40"]).answer)
    assert settings.max_questions == 40 and settings.sample == "stratified" and settings.guard.min_kappa == 0.4


GRADED = Path(__file__).resolve().parents[2] / "benchmarks" / "gnome-help" / "graded"


def test_committed_graded_set_is_whole_hashed_and_varied() -> None:
    """The set every run measures its judge on: >= 100 labelled answers from several systems and both
    model sizes, every answer graded, grades in the documented format, files matching SHA256SUMS."""
    import hashlib

    for line in (GRADED / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        assert hashlib.sha256((GRADED / name).read_bytes()).hexdigest() == digest, f"{name} changed: update SHA256SUMS"
    answers = [json.loads(line) for line in (GRADED / "answers.jsonl").read_text().splitlines() if line.strip()]
    labels = load_labels(GRADED / "labels.jsonl")
    items = {a["item"] for a in answers}
    assert len(items) == len(answers) >= 100
    assert items == set(labels), "every answer of the set is graded, and only those"
    assert {label.correctness for label in labels.values()} == {0.0, 0.5, 1.0}
    assert {a["llm"] for a in answers} == {"qwen_coder_05b", "qwen_coder_15b"}
    assert {"closed_book", "dense", "hybrid"} <= {a["system"] for a in answers}
    assert not any(a["abstained"] for a in answers)  # abstentions are graded by rule, never shown


def test_a_graded_set_for_other_questions_leaves_the_judge_unmeasured(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A run on another corpus keeps its answers: the set is skipped with a warning (the guard then flags
    the judge as not measured) instead of failing after every answer was paid for."""
    from fixgraph.answer.judging import measure_on_graded
    from fixgraph.answer.settings import GradedSet
    from tests.conftest import FIXTURES

    class NeverCalled:
        name = "never"

        def judge(self, question: Question, answer: str) -> Judgement:
            raise AssertionError("no question to judge against")

    graded = GradedSet(str(GRADED / "answers.jsonl"), str(GRADED / "labels.jsonl"), str(FIXTURES / "questions.jsonl"))
    with caplog.at_level("WARNING"):
        assert measure_on_graded(NeverCalled(), graded, 0.05, 100, 0) is None  # type: ignore[arg-type]
    assert "the judge is not measured" in caplog.text
