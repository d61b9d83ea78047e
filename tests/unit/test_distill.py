"""Cross-encoder distillation (training/distill.py): targets, loss, teacher-score plumbing, and a tiny
random BERT student that learns a toy teacher's ordering."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from fixgraph.corpus.models import Chunk, Document
from fixgraph.training.pairs import Group

torch = pytest.importorskip("torch")


def _softmax(x: np.ndarray, t: float) -> np.ndarray:
    e = np.exp((x - x.max(axis=-1, keepdims=True)) / t)
    return e / e.sum(axis=-1, keepdims=True)


TEACHER = np.array([[0.71, 0.52, 0.49, 0.30], [0.10, 0.45, 0.05, 0.20]])


def test_teacher_targets_are_softmax_of_scores_over_temperature() -> None:
    from fixgraph.training.distill import teacher_targets

    for t in (0.05, 0.1, 1.0):
        np.testing.assert_allclose(teacher_targets(TEACHER, t).numpy(), _softmax(TEACHER, t), rtol=1e-5)
    # by hand for one pair: softmax([0, 0.1] / 0.1) = [1, e] / (1 + e)
    np.testing.assert_allclose(teacher_targets([[0.0, 0.1]], 0.1).numpy(), [[1 / (1 + np.e), np.e / (1 + np.e)]])
    with pytest.raises(ValueError, match="temperature must be > 0"):
        teacher_targets(TEACHER, 0.0)


def test_distill_loss_is_kl_from_teacher_to_student() -> None:
    from fixgraph.training.distill import distill_loss

    student = np.array([[2.0, 0.5, -1.0, 0.0], [0.3, 0.2, 0.1, 0.0]])
    p = _softmax(TEACHER, 0.1)
    q = _softmax(student, 1.0)
    expected = float(np.mean(np.sum(p * (np.log(p) - np.log(q)), axis=1)))
    loss = distill_loss(torch.tensor(student), TEACHER, 0.1)
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    # a student whose logits are teacher / T (plus any per-group shift) has nothing left to learn
    assert float(distill_loss(torch.tensor(TEACHER / 0.1 + 3.0), TEACHER, 0.1)) == pytest.approx(0.0, abs=1e-6)


def _group(teacher: Sequence[float]) -> Group:
    return Group("q", "title", "p", tuple(f"n{i}" for i in range(len(teacher) - 1)), tuple(teacher))


def test_group_loss_mixes_kl_and_hard_label_by_distill_weight() -> None:
    from fixgraph.training.cross_encoder import CrossEncoderTrainer
    from fixgraph.training.nets.cross_encoder import group_loss

    logits = torch.tensor([[0.5, 1.5, -0.2, 0.0], [1.0, 0.0, 0.0, 0.3]])
    q = _softmax(logits.numpy(), 1.0)
    hard = float(np.mean(-np.log(q[:, 0])))  # the positive is first in every group
    p = _softmax(TEACHER, 0.05)
    soft = float(np.mean(np.sum(p * (np.log(p) - np.log(q)), axis=1)))
    assert float(group_loss(logits, None, 0.05, 0.5)) == pytest.approx(hard, rel=1e-5)
    for weight in (0.0, 0.3, 1.0):
        mixed = group_loss(logits, torch.tensor(TEACHER), 0.05, weight)
        assert float(mixed) == pytest.approx(weight * soft + (1 - weight) * hard, rel=1e-5)
    teacher = {"name": "hashing", "kind": "hashing"}
    common = {"name": "ce", "data_dir": "d", "output": "o", "fit": {"epochs": 1}}
    distill = CrossEncoderTrainer(**common, data={"teacher": teacher})
    plain = CrossEncoderTrainer(**common)
    assert "temperature" in distill.config() and "temperature" not in plain.config()
    with pytest.raises(ValueError, match="distill_weight must be in"):
        CrossEncoderTrainer(**common, data={"teacher": teacher}, distill_weight=1.5)


def test_group_json_keeps_teacher_scores_and_omits_them_when_absent() -> None:
    scored = _group([0.5, 0.25])
    assert Group.from_json(scored.to_json()) == scored
    plain = Group("q", "title", "p", ("n",))
    assert "teacher" not in plain.to_json() and Group.from_json(plain.to_json()) == plain


def _tag(text: str) -> str:
    return "VB" if text.split()[0] in {"Change", "Reset", "Use"} else "NN"


def test_questions_are_templated_from_imperative_titles_and_headings_only() -> None:
    from fixgraph.training.distill import as_question, question_queries

    assert as_question("Change the wallpaper", _tag) == "How do I change the wallpaper?"
    assert as_question("Use GNOME Shell", _tag) == "How do I use GNOME Shell?"
    assert as_question("Keyboard shortcuts", _tag) is None
    assert as_question("Change what?", _tag) is None  # already a question
    docs, chunks = _toy_corpus()
    assert sorted(question_queries(docs, chunks, _tag)) == [
        ("How do I change the wallpaper?", "question", "wall-0"),
        ("How do I change the wallpaper?", "question", "wall-1"),
        ("How do I reset the hub?", "question", "hub-0"),
        ("How do I use a picture?", "question", "wall-1"),
    ]


def _chunk(cid: str, doc: str, title: str, heading: list[str], text: str) -> Chunk:
    return Chunk(
        id=cid,
        doc_id=doc,
        start=0,
        end=len(text),
        text=text,
        title=title,
        heading_path=heading,
        section="",
        n_tokens=len(text.split()),
        content_hash=cid,
    )


def _toy_corpus() -> tuple[list[Document], list[Chunk]]:
    docs = [
        Document.model_validate(
            {"id": d, "source": "toy", "path": f"{d}.page", "title": t, "summary": "", "text": "", "sections": []}
        )
        for d, t in (("wall", "Change the wallpaper"), ("hub", "Reset the hub"), ("keys", "Keyboard shortcuts"))
    ]
    chunks = [
        _chunk("wall-0", "wall", "Change the wallpaper", [], "Open Settings and pick a background image."),
        _chunk("wall-1", "wall", "Change the wallpaper", ["Use a picture"], "Pick one of your own photos."),
        _chunk("hub-0", "hub", "Reset the hub", [], "Hold the reset button with a paper clip."),
        _chunk("keys-0", "keys", "Keyboard shortcuts", [], "Press Super to open the overview."),
        _chunk("keys-1", "keys", "Keyboard shortcuts", ["Copy"], "Ctrl+C copies the selection."),
    ]
    return docs, chunks


class _FixedEmbedder:
    """Orthogonal chunk vectors, so a query's cosine with each chunk is a number chosen in the test."""

    name = "fixed"
    dim = 5

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.index = {c.index_text(): i for i, c in enumerate(chunks)}

    def identity(self) -> str:
        return "fixed"

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.eye(self.dim, dtype=np.float32)[[self.index[t] for t in texts]]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([[0.1 * (len(t) % 7) + 0.05 * i for i in range(self.dim)] for t in texts], dtype=np.float32)


def test_distill_groups_carry_the_teachers_cosine_for_each_member() -> None:
    from fixgraph.training.distill import build_distill_groups

    docs, chunks = _toy_corpus()
    teacher = _FixedEmbedder(chunks)
    groups = build_distill_groups(
        docs, chunks, ["title", "heading", "question"], 3, 4, 0, 0, {"name": "bm25"}, teacher, tagger=_tag
    )
    assert {g.query_kind for g in groups} == {"title", "heading", "question"}
    position = {c.id: i for i, c in enumerate(chunks)}
    for g in groups:
        members = (g.positive, *g.negatives)
        assert len(set(members)) == 4 and len(g.teacher) == 4
        query = teacher.embed_queries([g.query])[0]
        assert list(g.teacher) == pytest.approx([float(query[position[m]]) for m in members], abs=1e-6)
    with pytest.raises(ValueError, match="unknown query kinds"):
        build_distill_groups(docs, chunks, ["paraphrase"], 3, 4, 0, 0, {"name": "bm25"}, teacher, tagger=_tag)


WORDS = ["alpha", "beta", "gamma", "delta", "what", "is", "best"]


def test_student_learns_a_toy_teachers_ordering_of_negatives(tmp_path: Path) -> None:
    """The teacher ranks alpha > beta > gamma > delta; the positive is always alpha, so only the soft
    targets say how beta, gamma and delta compare. A student trained on them (lightning, through the
    trainer's own data path) must reproduce that order."""
    from sentence_transformers import CrossEncoder

    from fixgraph.training.cross_encoder import CrossEncoderTrainer
    from tests.training_helpers import save_rows, tiny_bert

    scores = {"alpha": 0.9, "beta": 0.6, "gamma": 0.3, "delta": 0.0}
    rng = np.random.default_rng(0)

    def rows(n: int) -> list[dict[str, object]]:
        out = []
        for _ in range(n):
            negatives = [str(w) for w in rng.permutation(["beta", "gamma", "delta"])]
            members = ["alpha", *negatives]
            out.append(
                {
                    "query": "what is best",
                    "query_kind": "title",
                    "doc_id": "d",
                    "positive": "alpha",
                    "negatives": negatives,
                    "texts": members,
                    "teacher": [scores[m] for m in members],
                }
            )
        return out

    data = save_rows(tmp_path / "data", rows(32), rows(4))
    trainer = CrossEncoderTrainer(
        name="student",
        data_dir=str(data),
        output=str(tmp_path / "student"),
        base_model=str(tiny_bert(tmp_path / "tiny", WORDS)),
        max_length=16,
        batch_groups=4,
        learning_rate=3e-3,
        temperature=0.3,  # targets 0.64 / 0.24 / 0.09 / 0.03: every negative's place carries weight
        distill_weight=1.0,
        data={"teacher": {"name": "toy", "kind": "hashing"}},
        fit={"epochs": 16, "patience": 16, "threads": 1, "val_every_steps": None},
    )
    (tmp_path / "student").mkdir()
    facts = trainer.train(None, data, tmp_path / "student", tmp_path / "work", None)  # type: ignore[arg-type]
    assert facts["steps"] == 128 and facts["last_train_loss"] < facts["first_train_loss"]
    assert facts["best_val_loss"] < facts["first_val_loss"]
    student = CrossEncoder(str(tmp_path / "student"), num_labels=1, max_length=16)
    logits = student.predict([("what is best", w) for w in scores], activation_fn=torch.nn.Identity())
    assert [w for _, w in sorted(zip(-np.asarray(logits), scores, strict=True))] == list(scores)
    assert float(np.min(-np.diff(np.asarray(logits)))) > 0.05  # ordered by a margin, not by noise


def test_trainer_refuses_groups_without_teacher_scores(tmp_path: Path) -> None:
    from fixgraph.training.cross_encoder import CrossEncoderTrainer
    from tests.training_helpers import save_rows

    row = {"query": "q", "query_kind": "title", "doc_id": "d", "positive": "a", "negatives": ["b"]}
    data = save_rows(
        tmp_path / "data", [{**row, "texts": ["a", "b"], "teacher": []}], [{**row, "texts": ["a", "b"], "teacher": []}]
    )
    trainer = CrossEncoderTrainer(
        name="ce",
        data_dir=str(data),
        output="o",
        data={"teacher": {"name": "toy", "kind": "hashing"}},
        fit={"epochs": 1},
    )
    with pytest.raises(ValueError, match="groups lack teacher scores"):
        trainer.train(None, data, tmp_path / "out", tmp_path / "work", None)  # type: ignore[arg-type]
