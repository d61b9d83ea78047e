"""Frozen splits: deterministic, order-independent, stratified, bridge pairs together, tamper-evident."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from fixgraph.evaluation.locked_questions import LockedQuestionsError
from fixgraph.evaluation.protocol_errors import LockedSplitError, SplitError
from fixgraph.evaluation.questions import Question, load_questions
from fixgraph.evaluation.splits import build_split
from fixgraph.evaluation.splitting import assign, freeze, groups_of, read_split_file, unlocked_test_split
from tests.conftest import REPO

QTYPES = ["direct", "procedure", "multi", "unanswerable"]


def make_pool(n: int = 60, seed: int = 0) -> list[Question]:
    rng = random.Random(seed)
    pool = []
    for i in range(n):
        qtype = QTYPES[i % len(QTYPES)]
        answerable = qtype != "unanswerable"
        gold = [{"page": f"page-{i}", "quote": f"quote {i}"}] if answerable else []
        pool.append(Question(qid=f"q{i:03d}", question=f"question {i} {rng.random()}", qtype=qtype,
                             answerable=answerable, gold=gold))  # fmt: skip
    # bridge questions: b0 and b1 share the pair {A, B} (in opposite directions); b2 touches page-2
    pool.append(Question(qid="b0", question="?", qtype="bridge", gold=[{"page": "B", "quote": "x"}],
                         bridge={"from": "A", "to": "B"}))  # fmt: skip
    pool.append(Question(qid="b1", question="??", qtype="bridge", gold=[{"page": "A", "quote": "y"}],
                         bridge={"from": "B", "to": "A"}))  # fmt: skip
    pool.append(Question(qid="b2", question="???", qtype="bridge", gold=[{"page": "C", "quote": "z"}],
                         bridge={"from": "page-2", "to": "C"}))  # fmt: skip
    pool.append(Question(qid="g0", question="grouped", gold=[{"page": "D", "quote": "w"}], group="team"))
    pool.append(Question(qid="g1", question="grouped too", gold=[{"page": "E", "quote": "v"}], group="team"))
    return pool


def write_pool(path: Path, pool: list[Question]) -> Path:
    path.write_text("".join(json.dumps(q.model_dump(by_alias=True, exclude_unset=True)) + "\n" for q in pool))
    return path


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), salt=st.sampled_from(["s1", "s2", "another salt"]))
def test_assignment_ignores_order_and_keeps_groups_together(seed: int, salt: str) -> None:
    pool = make_pool()
    shuffled = pool[:]
    random.Random(seed).shuffle(shuffled)
    parts = assign(pool, 0.3, salt)
    assert assign(shuffled, 0.3, salt) == parts
    assert parts["b0"] == parts["b1"]  # the same bridge pair, either direction
    assert parts["b2"] == parts["q002"]  # a bridge question and a question on one of its pages
    assert parts["g0"] == parts["g1"]  # an explicit group


def test_each_question_type_is_split_in_proportion() -> None:
    pool = make_pool(200)
    parts = assign(pool, 0.3, "salt")
    groups = groups_of(pool)
    per_type = Counter(g[0].qtype for g in groups if len(g) == 1)
    tests = Counter(g[0].qtype for g in groups if len(g) == 1 and parts[g[0].qid] == "test")
    for qtype, n in per_type.items():
        # singleton groups of one type, plus at most one multi-member group per type: |share - 0.3| small
        assert abs(tests[qtype] - 0.3 * n) <= 2, (qtype, tests[qtype], n)


def test_salt_changes_the_split() -> None:
    pool = make_pool()
    assert assign(pool, 0.3, "a") != assign(pool, 0.3, "b")


def test_edited_test_question_is_detected(tmp_path: Path) -> None:
    pool = make_pool()
    pool_file = write_pool(tmp_path / "pool.jsonl", pool)
    split_file = tmp_path / "split.json"
    split, status = freeze(pool_file, split_file, 0.3, "salt")
    assert status == "frozen"
    assert freeze(pool_file, split_file, 0.3, "salt")[1] == "verified"
    victim = split.ids("test")[0]
    # same id, same question text: only the reference answer changes
    edited = [q.model_copy(update={"answer": "something else"}) if q.qid == victim else q for q in pool]
    write_pool(pool_file, edited)
    with pytest.raises(SplitError, match=rf"test question '{victim}' was edited since the split was frozen"):
        freeze(pool_file, split_file, 0.3, "salt")
    frozen_dev = build_split({"name": "dev", "kind": "frozen", "part": "dev", "questions": str(pool_file),
                              "file": str(split_file), "exclude_locked": False})  # fmt: skip
    with pytest.raises(SplitError, match=victim):
        frozen_dev.load()


def test_added_removed_and_moved_questions_are_detected(tmp_path: Path) -> None:
    pool = make_pool()
    pool_file = write_pool(tmp_path / "pool.jsonl", pool)
    split_file = tmp_path / "split.json"
    freeze(pool_file, split_file, 0.3, "salt")
    extra = Question(qid="new-1", question="new", gold=[{"page": "Z", "quote": "z"}])
    write_pool(pool_file, [*pool[1:], extra])
    with pytest.raises(SplitError, match=r"'new-1' is not in the frozen split.*'q000' \(\w+\) was removed"):
        freeze(pool_file, split_file, 0.3, "salt")
    write_pool(pool_file, pool)

    data = json.loads(split_file.read_text())
    moved = next(qid for qid, e in data["questions"].items() if e["part"] == "test" and qid.startswith("q"))
    data["questions"][moved]["part"] = "dev"
    split_file.write_text(json.dumps(data))
    with pytest.raises(SplitError, match="edited by hand"):
        freeze(pool_file, split_file, 0.3, "salt")
    # a careful forger also recomputes the digest: the assignment rule still catches the move
    from fixgraph.io import stable_hash

    data["digest"] = stable_hash(data["questions"])
    split_file.write_text(json.dumps(data))
    with pytest.raises(SplitError, match=rf"do not follow the split rule for {moved}"):
        freeze(pool_file, split_file, 0.3, "salt")


def test_refreeze_needs_a_reason_and_keeps_history(tmp_path: Path) -> None:
    pool = make_pool()
    pool_file = write_pool(tmp_path / "pool.jsonl", pool)
    split_file = tmp_path / "split.json"
    freeze(pool_file, split_file, 0.3, "salt")
    with pytest.raises(SplitError, match="frozen with salt 'salt'"):
        freeze(pool_file, split_file, 0.3, "other")
    _, status = freeze(pool_file, split_file, 0.3, "other", refreeze_reason="new questions arrived")
    assert status == "refrozen"
    assert [h["reason"] for h in read_split_file(split_file).history] == ["initial freeze", "new questions arrived"]


def test_hand_edited_history_is_detected(tmp_path: Path) -> None:
    pool_file = write_pool(tmp_path / "pool.jsonl", make_pool())
    split_file = tmp_path / "split.json"
    freeze(pool_file, split_file, 0.3, "salt")
    freeze(pool_file, split_file, 0.3, "other", refreeze_reason="re-drawn after looking at test")
    data = json.loads(split_file.read_text())
    data["history"] = data["history"][:1]  # hide the refreeze
    split_file.write_text(json.dumps(data))
    with pytest.raises(SplitError, match="history was edited by hand"):
        freeze(pool_file, split_file, 0.3, "other")
    del data["history_digest"]  # or drop the seal altogether
    split_file.write_text(json.dumps(data))
    with pytest.raises(SplitError, match="no history_digest"):
        freeze(pool_file, split_file, 0.3, "other")


def test_test_part_is_locked_outside_the_protocol(tmp_path: Path) -> None:
    pool_file = write_pool(tmp_path / "pool.jsonl", make_pool())
    split_file = tmp_path / "split.json"
    split, _ = freeze(pool_file, split_file, 0.3, "salt")
    node = {"kind": "frozen", "questions": str(pool_file), "file": str(split_file), "exclude_locked": False}
    test = build_split({**node, "name": "test", "part": "test"})
    with pytest.raises(LockedSplitError, match="fixgraph test"):
        test.load()
    with unlocked_test_split("study"):
        assert sorted(q.qid for q in test.load()) == split.ids("test")
    dev = build_split({**node, "name": "dev", "part": "dev"})
    assert sorted(q.qid for q in dev.load()) == split.ids("dev")
    assert not set(split.ids("dev")) & set(split.ids("test"))


def test_committed_split_matches_the_committed_pool() -> None:
    """benchmarks/gnome-help/split.json (a DVC output) still verifies against dev.jsonl."""
    pool = load_questions(REPO / "benchmarks/gnome-help/dev.jsonl")
    split = read_split_file(REPO / "benchmarks/gnome-help/split.json")
    from fixgraph.evaluation.splitting import verify

    verify(split, pool, REPO / "benchmarks/gnome-help/split.json")
    assert len(split.ids("dev")) + len(split.ids("test")) == len(pool) == 115


@pytest.mark.parametrize(
    "split_file", sorted(p.relative_to(REPO).as_posix() for p in REPO.glob("benchmarks/*/split.json"))
)
def test_every_committed_split_verifies(split_file: str) -> None:
    """Each frozen split in benchmarks/ (main pool, bridge file, ...) verifies against its pool, with a
    sealed history: a split frozen before a format change would otherwise fail only when used."""
    from fixgraph.evaluation.splitting import verify

    split = read_split_file(REPO / split_file)
    verify(split, load_questions(REPO / split.pool), REPO / split_file)
    assert split.ids("dev") and split.ids("test")


def _frozen_dev(tmp_path: Path, name: str, pool: list[Question]) -> dict[str, object]:
    pool_file = write_pool(tmp_path / f"{name}.jsonl", pool)
    freeze(pool_file, tmp_path / f"{name}.split.json", 0.3, "salt")
    return {"name": name, "kind": "frozen", "part": "dev", "questions": str(pool_file),
            "file": str(tmp_path / f"{name}.split.json"), "exclude_locked": False}  # fmt: skip


def _renamed(pool: list[Question], prefix: str) -> list[Question]:
    """The plain questions of a pool under other ids and texts (a second, unrelated question set)."""
    plain = [q for q in pool if q.qid.startswith("q")]
    return [q.model_copy(update={"qid": f"{prefix}{q.qid}", "question": f"{prefix} {q.question}"}) for q in plain]


def test_a_union_pools_the_dev_parts_of_frozen_splits(tmp_path: Path) -> None:
    a, b = _frozen_dev(tmp_path, "a", make_pool(40)), _frozen_dev(tmp_path, "b", _renamed(make_pool(30, 1), "x"))
    union = build_split({"name": "both", "kind": "union", "parts": {"a": a, "b": b}})
    expected = [q.qid for q in build_split(a).load()] + [q.qid for q in build_split(b).load()]
    assert [q.qid for q in union.load()] == expected
    assert union.paths == (Path(str(a["questions"])), Path(str(b["questions"])))
    from fixgraph.evaluation.splits import resolve_questions
    from fixgraph.io import sha256_file, stable_hash

    cfg = OmegaConf.create({"split": {"name": "both", "kind": "union", "parts": {"a": a, "b": b}}})
    record = resolve_questions(cfg, None, None).provenance()
    assert record["questions_file"] == f"{a['questions']} + {b['questions']}"
    assert record["questions_hash"] == stable_hash([sha256_file(Path(str(p["questions"]))) for p in (a, b)])
    one = OmegaConf.create({"split": a})
    assert resolve_questions(one, None, None).provenance() == {
        "questions_file": str(a["questions"]), "questions_hash": sha256_file(Path(str(a["questions"])))
    }  # fmt: skip


def test_a_union_refuses_test_parts_shared_ids_and_other_parts_locked_questions(tmp_path: Path) -> None:
    pool = make_pool(40)
    a = _frozen_dev(tmp_path, "a", pool)
    with pytest.raises(SplitError, match="part 'a_test' is not the dev part"):
        build_split({"name": "u", "kind": "union", "parts": {"a": a, "a_test": {**a, "part": "test"}}})
    twin = _frozen_dev(tmp_path, "twin", pool)  # the same question ids in a second pool
    with pytest.raises(SplitError, match="is in part 'a' and in part 'twin'"):
        build_split({"name": "u", "kind": "union", "parts": {"a": a, "twin": twin}}).load()
    # part c copies, under new ids, the text of a's locked test questions
    locked = set(read_split_file(tmp_path / "a.split.json").ids("test"))
    copies = [q.model_copy(update={"qid": f"c-{q.qid}"}) for q in pool if q.qid in locked and q.qid.startswith("q")]
    c = _frozen_dev(tmp_path, "c", _renamed(make_pool(30, 2), "y") + copies)
    c_dev = {q.qid for q in build_split(c).load()}  # c's own split keeps some copies in its dev part
    leaked = sorted(c_dev & {q.qid for q in copies})
    assert leaked
    node = {"name": "u", "kind": "union", "parts": {"a": a, "c": c}}
    with pytest.raises(LockedQuestionsError, match=leaked[0]):
        build_split(node).load()
    union = build_split({**node, "exclude_locked": True})
    kept = {q.qid for q in union.load()}
    assert not kept & set(leaked) and {m.qid for m in union.excluded} == set(leaked)


def test_a_union_records_every_split_it_guarded_against_and_which_locks_each_dropped_question(
    tmp_path: Path,
) -> None:
    from fixgraph.evaluation.splits import resolve_questions

    pool = make_pool(40)
    a = _frozen_dev(tmp_path, "a", pool)
    locked = set(read_split_file(tmp_path / "a.split.json").ids("test"))
    copies = [q.model_copy(update={"qid": f"c-{q.qid}"}) for q in pool if q.qid in locked and q.qid.startswith("q")]
    c = _frozen_dev(tmp_path, "c", _renamed(make_pool(30, 2), "y") + copies)
    cfg = OmegaConf.create({"split": {"name": "u", "kind": "union", "parts": {"a": a, "c": c}, "exclude_locked": True}})
    record = resolve_questions(cfg, None, None).exclusion()
    assert record["split_file"] == f"{a['file']} + {c['file']}"  # c's test part guarded a's questions too
    assert record["count"] == len(record["questions"]) > 0
    assert {q["split_file"] for q in record["questions"]} == {str(a["file"])}  # the copies are a's locked ones
