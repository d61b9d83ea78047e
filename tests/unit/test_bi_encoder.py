"""The bi-encoder trainer (training/bi_encoder.py): InfoNCE with in-batch and hard negatives against a
numpy reference, the same-page mask, corpus-only pairs, and a tiny sentence embedder that learns a toy
synonym task through the trainer's own data path."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fixgraph.training.bi_encoder import BiEncoderTrainer  # noqa: E402
from fixgraph.training.nets.bi_encoder import contrastive_loss, same_page_mask  # noqa: E402


def test_contrastive_loss_is_cross_entropy_over_scaled_cosines_with_masked_candidates() -> None:
    rng = np.random.default_rng(0)
    q = rng.normal(size=(3, 4))
    c = rng.normal(size=(6, 4))  # 3 positives (the diagonal) + 3 hard negatives
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    mask = np.zeros((3, 6), dtype=bool)
    mask[0, 4] = True  # candidate 4 comes from query 0's page
    scores = 20.0 * q @ c.T
    scores[mask] = -np.inf
    log_softmax = (
        scores
        - np.log(np.exp(scores - scores.max(1, keepdims=True)).sum(1, keepdims=True))
        - scores.max(1, keepdims=True)
    )
    expected = -np.mean([log_softmax[i, i] for i in range(3)])
    loss, _ = contrastive_loss(torch.tensor(q), torch.tensor(c), torch.tensor(mask), 20.0)
    assert float(loss) == pytest.approx(expected, rel=1e-6)


def test_same_page_candidates_are_masked_except_the_target() -> None:
    mask = same_page_mask(["a", "b", "a"], ["a", "b", "a", "b", "c"])
    assert mask.tolist() == [
        [False, False, True, False, False],  # query 0 (page a): its own positive stays, the other a goes
        [False, False, False, True, False],
        [True, False, False, False, False],
    ]


def test_pairs_come_from_titles_summaries_headings_and_generated_questions(tmp_path: Path) -> None:
    from fixgraph.io import write_jsonl
    from fixgraph.training.bi_encoder import PairData, build_pairs
    from tests.unit.test_distill import _toy_corpus

    docs, chunks = _toy_corpus()
    qa = tmp_path / "qa.jsonl"
    row = {"doc_id": "hub", "answer": "a", "support": 1.0, "prompt_version": "p", "model": "m"}
    write_jsonl(qa, [{**row, "chunk_id": "hub-0", "question": "My hub is stuck, what now?"}])
    data = PairData(query_kinds=["title", "heading", "llm_question"], qa_pairs=str(qa), negatives=1, negative_pool=4)
    rows = build_pairs(docs, chunks, data)
    by_chunk = {c.id: c for c in chunks}
    assert {r["query_kind"] for r in rows} == {"title", "heading", "llm_question"}
    for r in rows:
        positive = by_chunk[r["positive"]]
        assert r["positive_text"] == positive.index_text() and r["doc_id"] == positive.doc_id
        assert len(r["negatives"]) == 1 and r["negative_docs"] != [positive.doc_id]  # another page
    assert ("My hub is stuck, what now?", "hub-0") in {(r["query"], r["positive"]) for r in rows}
    with pytest.raises(ValueError, match=r"needs data\.qa_pairs"):
        build_pairs(docs, chunks, PairData(query_kinds=["llm_question"]))


SYNONYMS = {
    "modem": "router",
    "display": "monitor",
    "pointer": "mouse",
    "keypad": "keyboard",
    "wireless": "wifi",
    "speaker": "audio",
}


def synonym_rows() -> list[dict[str, object]]:
    """One training row per synonym: the query, its passage, and the next passage as hard negative."""
    passages = list(SYNONYMS.values())
    return [
        {"query": q, "query_kind": "title", "doc_id": p, "positive": p, "positive_text": p,
         "negatives": [n], "negative_texts": [n], "negative_docs": [n]}
        for q, p, n in zip(SYNONYMS, passages, passages[1:] + passages[:1], strict=True)
    ]  # fmt: skip


def toy_trainer(
    data: Path, base: Path, out: Path, epochs: int, gradient_checkpointing: bool = False
) -> BiEncoderTrainer:
    return BiEncoderTrainer(
        name="toy",
        data_dir=str(data),
        output=str(out),
        base={"name": "toy", "kind": "sentence_transformers", "model": str(base)},
        batch_size=3,
        learning_rate=5e-3,
        max_seq_length=16,
        fit={"epochs": epochs, "patience": epochs, "threads": 1},
        gradient_checkpointing=gradient_checkpointing,
    )


def test_tiny_embedder_learns_toy_synonyms(tmp_path: Path) -> None:
    """Six queries, each a synonym of one passage word; a random 2-layer encoder starts near chance and
    must put every query's own passage first after training."""
    from sentence_transformers import SentenceTransformer

    from tests.training_helpers import save_rows, tiny_sentence_transformer

    base = tiny_sentence_transformer(tmp_path / "base", [*SYNONYMS, *SYNONYMS.values()])
    passages = list(SYNONYMS.values())
    rows = synonym_rows()
    data = save_rows(tmp_path / "data", rows, rows[:2])

    def top1(model_dir: Path) -> float:
        model = SentenceTransformer(str(model_dir), device="cpu")
        q = model.encode(list(SYNONYMS), normalize_embeddings=True)
        p = model.encode(passages, normalize_embeddings=True)
        return float(np.mean(np.argmax(q @ p.T, axis=1) == np.arange(len(passages))))

    before = top1(base)
    trainer = toy_trainer(data, base, tmp_path / "out", epochs=40)
    (tmp_path / "out").mkdir()
    facts = trainer.train(None, data, tmp_path / "out", tmp_path / "work", None)  # type: ignore[arg-type]
    assert facts["last_train_loss"] < facts["first_train_loss"] and facts["steps"] == 80
    assert before < 0.5 and top1(tmp_path / "out") == 1.0


def test_gradient_checkpointing_trains_the_same_weights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`gradient_checkpointing: true` only trades memory for a recomputation: the trainer must save
    exactly the weights it saves without it (dropout on, as in training)."""
    from safetensors.torch import load_file

    from fixgraph.training import bi_encoder
    from tests.training_helpers import save_rows, tiny_sentence_transformer

    checkpointed_models: list[object] = []
    real = bi_encoder.checkpoint_layers
    monkeypatch.setattr(bi_encoder, "checkpoint_layers", lambda m: (checkpointed_models.append(m), real(m)))
    base = tiny_sentence_transformer(tmp_path / "base", [*SYNONYMS, *SYNONYMS.values()])
    rows = synonym_rows()
    data = save_rows(tmp_path / "data", rows, rows[:2])
    weights = []
    for checkpointing in (False, True):
        out = tmp_path / f"out_{checkpointing}"
        out.mkdir()
        trainer = toy_trainer(data, base, out, epochs=3, gradient_checkpointing=checkpointing)
        trainer.train(None, data, out, tmp_path / f"work_{checkpointing}", None)  # type: ignore[arg-type]
        weights.append(load_file(str(out / "model.safetensors")))
    plain, checkpointed = weights
    assert len(checkpointed_models) == 1  # the second run only
    base_weights = load_file(str(base / "model.safetensors"))
    assert plain.keys() == checkpointed.keys()
    assert all(torch.equal(plain[k], checkpointed[k]) for k in plain)
    assert any(not torch.equal(plain[k], base_weights[k]) for k in plain)  # it did train
