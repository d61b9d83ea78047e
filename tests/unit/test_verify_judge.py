"""Claim verifier, LLM judge and scoring rules with the fake LLM (including malformed verdicts)."""

from __future__ import annotations

import json

import pytest

from fixgraph.answer.base import GroundedAnswer, Sentence
from fixgraph.answer.ragas import RagasMetrics, average_precision
from fixgraph.answer.scoring import ScoredAnswer, abstention_judgement
from fixgraph.answer.verify import ClaimVerifier, SentenceVerdict, Verification, build_verifier
from fixgraph.embedders.encoders import HashingEmbedder
from fixgraph.evaluation.gold import GoldItem, GoldMapping
from fixgraph.evaluation.llm_judge import LLMJudge
from fixgraph.evaluation.questions import Question
from fixgraph.llm.base import FakeLLM
from fixgraph.llm.client import LLMClient
from tests.unit.test_answering import CHUNKS


def client(*replies: object) -> LLMClient:
    return LLMClient(FakeLLM(script=list(replies)), cache={"enabled": False})


def verdict(supported: bool, quote: str) -> str:
    return json.dumps({"supported": supported, "quote": quote})


def answer(*sentences: Sentence, context: tuple[str, ...] = ("a#1", "b#1", "c#1")) -> GroundedAnswer:
    return GroundedAnswer("q1", "hybrid", list(sentences), context_ids=list(context))


QUESTION = Question(
    qid="q1",
    question="How do I forget my earbuds?",
    gold=[{"page": "a", "quote": "Click Remove Device"}],
    answer="Click Remove Device in the Bluetooth panel.",
    key_facts=["open the Bluetooth panel", "click Remove Device"],
)


def test_verifier_accepts_only_quotes_found_in_the_cited_chunk() -> None:
    llm = client(
        verdict(True, "Click Remove Device to forget the earbuds."),  # s1 vs a#1: in the chunk
        verdict(True, "Reinstall the operating system."),  # s1 vs b#1: model agrees, quote invented
        verdict(False, ""),  # s2 vs c#1
        "not json at all",  # s3 vs b#1: malformed ...
        "still not json",  # ... and after the client's one retry
    )
    result = ClaimVerifier(llm).verify(
        answer(
            Sentence("Click Remove Device.", ("a#1", "b#1")),
            Sentence("Printers are unrelated.", ("c#1",)),
            Sentence("Switch it off.", ("b#1",)),
            Sentence("No citation here."),
        ),
        CHUNKS,
    )
    reasons = [s.reasons for s in result.sentences]
    assert reasons == [
        {"a#1": "supported", "b#1": "quote_not_in_chunk"},
        {"c#1": "llm_unsupported"},
        {"b#1": "invalid_answer"},
        {},
    ]
    assert [s.supported for s in result.sentences] == [True, False, False, False]
    assert result.unsupported_rate == 3 / 4  # the uncited sentence counts as unsupported
    assert result.citation_precision == 1 / 4  # 4 (sentence, citation) pairs, one supports
    assert result.citation_recall == 1 / 4
    assert result.reason_counts() == {
        "invalid_answer": 1, "llm_unsupported": 1, "quote_not_in_chunk": 1, "supported": 1, "uncited": 1,
    }  # fmt: skip


def test_verifier_records_cost_and_handles_unknown_chunks() -> None:
    llm = client(verdict(True, "Switch Bluetooth off"))
    a = answer(Sentence("Toggle it.", ("b#1", "zzz")))
    result = ClaimVerifier(llm).verify(a, CHUNKS)
    assert result.sentences[0].reasons == {"b#1": "supported", "zzz": "unknown_chunk"}
    assert a.cost["verify"].calls == 1
    assert ClaimVerifier(client()).verify(answer(), CHUNKS).unsupported_rate is None  # no sentence


def test_verifier_uses_its_own_model_when_configured() -> None:
    answering = client()
    own = {
        "name": "fake",
        "kind": "fake",
        "model": "checker",
        "default": {"supported": True, "quote": "Switch Bluetooth off"},
    }
    verifier, enabled = build_verifier({"enabled": False, "quote_min": 80, "llm": own}, answering)
    assert not enabled and verifier.own_model and verifier.quote_min == 80
    assert verifier.llm is not answering and verifier.llm.identity() == "fake:checker"
    assert verifier.verify(answer(Sentence("Toggle it.", ("b#1",))), CHUNKS).sentences[0].supported
    assert answering.usage.totals() == {}  # the answering model was not asked
    default, _ = build_verifier(None, answering)
    assert default.llm is answering and not default.own_model


FAKE_JUDGE_LLM = {"name": "fake", "kind": "fake", "model": "judge"}


def llm_judge(reply_client: LLMClient | None = None) -> LLMJudge:
    judge = LLMJudge("llm", FAKE_JUDGE_LLM, "judge_v2", 60)
    if reply_client is not None:
        judge._client = reply_client  # scripted replies instead of the configured fake's default
    return judge


def test_judge_grades_and_counts_key_facts() -> None:
    judge = llm_judge(client(json.dumps({"correctness": 0.5, "covered": [2, 7, 2], "rationale": "partly"})))
    judgement, cost = judge.judge_with_cost(QUESTION, "Click Remove Device.")
    assert judgement.correctness == 0.5
    assert judgement.key_fact_recall == 1 / 2  # fact 2 (twice) counted once; 7 is not a fact
    assert judgement.covered == (2,) and judgement.n_facts == 2
    assert cost.calls == 1
    prompt = judge.client.backend.requests[0]["prompt"]
    assert "1. open the Bluetooth panel\n2. click Remove Device" in prompt and QUESTION.answer in prompt


@pytest.mark.parametrize("bad", ['{"correctness": 0.7, "covered": []}', "grade: 1", '{"covered": [1]}'])
def test_malformed_judgement_is_not_judged_rather_than_zero(bad: str) -> None:
    judge = llm_judge(client(bad, bad))
    judgement, cost = judge.judge_with_cost(QUESTION, "anything")
    assert judgement.correctness is None and judgement.key_fact_recall is None
    assert cost.calls == 2  # first try + one retry with the validation error


def test_llm_judge_needs_a_model_of_its_own() -> None:
    judge = llm_judge()  # builds its own client from judge.llm
    assert judge.client.identity() == "fake:judge" and judge.identity().startswith("llm:fake:judge:judge_v2@")
    with pytest.raises(ValueError, match=r"needs its own model, judge.llm"):
        LLMJudge("llm", {}, "judge_v2", 60)


def test_abstentions_are_graded_by_rule() -> None:
    assert abstention_judgement(QUESTION).correctness == 0.0
    unanswerable = Question(qid="u", question="?", answerable=False, qtype="unanswerable")
    assert abstention_judgement(unanswerable).correctness == 1.0
    assert abstention_judgement(unanswerable).key_fact_recall is None


def test_row_reports_gold_and_support_views_separately() -> None:
    # cites a#1 (gold, supports) and c#1 (not gold; supports in this scenario): gold precision 1/2,
    # support precision 2/2 -- the support view credits a correct non-gold citation
    a = answer(Sentence("Click Remove Device.", ("a#1", "c#1")))
    llm = client(verdict(True, "Click Remove Device"), verdict(True, "Unrelated text about printers."))
    verification = ClaimVerifier(llm).verify(a, CHUNKS)
    mapping = GoldMapping([GoldItem("q1", 0, "a", "Click Remove Device", "mapped", ["a#1"])])
    from fixgraph.answer.ragas import RagasScores
    from fixgraph.evaluation.judge import Judgement

    scored = ScoredAnswer(QUESTION, a, verification, Judgement(1.0, 0.5), RagasScores(None, None, None), 0.01)
    row = scored.row(mapping)
    assert row["citation_precision_gold"] == 0.5 and row["citation_precision_support"] == 1.0
    assert row["citation_recall_gold"] == 1.0 and row["unsupported_claim_rate"] == 0.0
    assert row["correctness"] == 1.0 and row["abstained"] == 0.0 and row["retrieve_ms"] == pytest.approx(10.0)
    assert scored.record()["sentences"][0]["verdicts"] == {"a#1": "supported", "c#1": "supported"}


def test_average_precision_by_hand() -> None:
    assert average_precision([True, False, True]) == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert average_precision([False, False]) == 0.0 and average_precision([]) is None


def test_ragas_metrics_and_abstention_is_not_applicable() -> None:
    llm = client(
        json.dumps({"question": "How do I forget my earbuds?"}),  # relevance: the same question back
        verdict(True, "Switch Bluetooth off and on again."),  # faithfulness of s2 against the whole context
    )
    verifier = ClaimVerifier(llm)
    metrics = RagasMetrics(llm, HashingEmbedder(), verifier)
    a = answer(Sentence("Click Remove Device.", ("a#1",)), Sentence("Toggle Bluetooth.", ()))
    verification = Verification(  # as the verifier would leave it: s1 supported by a#1, s2 uncited
        [
            SentenceVerdict("Click Remove Device.", ("a#1",), {"a#1": "supported"}),
            SentenceVerdict("Toggle Bluetooth.", ()),
        ]
    )
    scores = metrics.score(QUESTION.question, a, verification, CHUNKS)
    assert scores.answer_relevance == pytest.approx(1.0)  # identical question, cosine 1
    assert scores.faithfulness == 1.0  # s1 by its citation, s2 found in the context
    assert scores.context_precision == 1.0  # a#1 (rank 1) is the only useful chunk: AP = 1/1
    abstained = GroundedAnswer("q1", "hybrid", abstained=True)
    assert metrics.score("?", abstained, verification, CHUNKS) == type(scores)(None, None, None)
