"""The query-encoder trainer (training/query_encoder.py): the frozen index scores chunks as DenseRetriever
does, the loss against a numpy reference, a tiny embedder whose query side learns toy synonyms against
document vectors that never move, and the embedder's `query_model` (queries only, its card checked)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from omegaconf import DictConfig

torch = pytest.importorskip("torch")

from fixgraph.training.nets.query_encoder import FrozenIndex, gold_loss  # noqa: E402

FIT_1 = {"epochs": 1}
SYNONYMS = {"modem": "router", "display": "monitor", "pointer": "mouse", "keypad": "keyboard", "speaker": "audio"}


def random_index(block_weight: float) -> tuple[Any, FrozenIndex]:
    """A DenseRetriever's rows set by hand (4 chunks: own rows, and lines for all but chunk 2) and the
    FrozenIndex over the same rows."""
    from fixgraph.retrieval.dense import DenseRetriever

    rng = np.random.default_rng(0)
    owner = np.array([0, 1, 2, 3, 0, 0, 1, 3, 3, 3])
    is_line = np.arange(len(owner)) >= 4
    matrix = rng.normal(size=(len(owner), 8)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    dense = DenseRetriever(embedder={"kind": "hashing", "name": "hashing", "dim": 8}, block_weight=block_weight)
    dense._matrix, dense._owner, dense._is_line, dense._ids = matrix, owner, is_line, ["a", "b", "c", "d"]
    return dense, FrozenIndex(matrix, owner, is_line, ["a", "b", "c", "d"], block_weight)


@pytest.mark.parametrize("block_weight", [0.0, 0.5, 1.0])
def test_frozen_index_scores_chunks_as_the_dense_retriever(block_weight: float) -> None:
    dense, index = random_index(block_weight)
    for seed in range(5):
        q = np.random.default_rng(seed).normal(size=8).astype(np.float32)
        q /= np.linalg.norm(q)
        expected = dense._chunk_scores(q)
        np.testing.assert_allclose(index.scores(torch.from_numpy(q)).numpy(), expected, rtol=1e-6, atol=1e-6)


def test_gold_loss_is_minus_log_probability_of_each_item_averaged() -> None:
    logits = torch.tensor([2.0, 0.5, -1.0, 1.0])
    p = np.exp(logits.numpy()) / np.exp(logits.numpy()).sum()
    # item one: chunk 0; item two: a quote over chunks 1 and 3, whose probability is their sum
    expected = -(np.log(p[0]) + np.log(p[1] + p[3])) / 2
    assert float(gold_loss(logits, [[0], [1, 3]])) == pytest.approx(expected, rel=1e-6)


def toy_trainer(base: Path, tmp_path: Path, epochs: int) -> Any:
    from fixgraph.training.query_encoder import QueryEncoderTrainer

    embedder = {"name": "toy", "kind": "sentence_transformers", "model": str(base), "query_backend": "torch"}
    return QueryEncoderTrainer(
        name="toy",
        data_dir=str(tmp_path / "data"),
        output=str(tmp_path / "out"),
        index={"kind": "dense", "name": "toy_dense", "embedder": embedder, "block_weight": 0.0},
        batch_size=5,
        learning_rate=5e-3,
        max_query_length=16,
        fit={"epochs": epochs, "patience": epochs, "threads": 1},
    )


@pytest.fixture
def trained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Path, np.ndarray]:
    """The toy trainer run on five synonym questions against the base model's passage vectors."""
    from sentence_transformers import SentenceTransformer

    from tests.training_helpers import save_rows, tiny_sentence_transformer

    base = tiny_sentence_transformer(tmp_path / "base", [*SYNONYMS, *SYNONYMS.values()])
    passages = list(SYNONYMS.values())
    vectors = SentenceTransformer(str(base), device="cpu").encode(passages, normalize_embeddings=True)
    frozen = FrozenIndex(vectors, np.arange(len(passages)), np.zeros(len(passages), bool), passages, 0.0)
    rows = [{"query": q, "corpus": "toy", "page": f"toy/{p}", "gold": [[p]]} for q, p in SYNONYMS.items()]
    data = save_rows(tmp_path / "data", rows, rows[:2])
    trainer = toy_trainer(base, tmp_path, epochs=30)
    monkeypatch.setattr(trainer, "frozen_indexes", lambda cfg, corpora: {"toy": frozen})
    (tmp_path / "out").mkdir()
    facts = trainer.train(DictConfig({}), data, tmp_path / "out", tmp_path / "work", None)
    return facts, base, vectors


def top1(queries: np.ndarray, passages: np.ndarray) -> float:
    return float(np.mean(np.argmax(queries @ passages.T, axis=1) == np.arange(len(passages))))


def test_the_query_side_learns_against_document_vectors_that_never_move(
    trained: tuple[Any, Path, np.ndarray], tmp_path: Path
) -> None:
    from fixgraph.embedders.encoders import SentenceTransformerEmbedder
    from fixgraph.io import write_json

    facts, base, passages = trained
    stock = SentenceTransformerEmbedder(name="toy", model=str(base), query_backend="torch")
    assert top1(stock.embed_queries(list(SYNONYMS)), passages) < 0.5  # a random encoder: near chance
    assert facts["last_train_loss"] < facts["first_train_loss"] and facts["document_embedder"] == stock.identity()
    write_json(tmp_path / "out" / "fixgraph_model.json", facts)  # what the train stage writes around it
    tuned = SentenceTransformerEmbedder(
        name="toy", model=str(base), query_backend="torch", query_model=str(tmp_path / "out")
    )
    assert top1(tuned.embed_queries(list(SYNONYMS)), passages) == 1.0
    assert tuned.identity() == stock.identity()  # the same document vectors, index and cache
    np.testing.assert_array_equal(tuned.embed_documents(list(SYNONYMS.values())), passages)
    # more than 16 texts take encode()'s batched path: the query model there too
    many = [*SYNONYMS] * 4
    np.testing.assert_allclose(tuned.embed_queries(many)[:5], tuned.embed_queries(list(SYNONYMS)), atol=1e-5)


def test_a_query_model_trained_for_other_document_vectors_is_refused(
    trained: tuple[Any, Path, np.ndarray], tmp_path: Path
) -> None:
    from fixgraph.embedders.encoders import SentenceTransformerEmbedder
    from fixgraph.io import write_json

    facts, base, _ = trained
    write_json(tmp_path / "out" / "fixgraph_model.json", facts)
    other = SentenceTransformerEmbedder(
        name="toy", model=str(base), query_backend="torch", max_seq_length=8, query_model=str(tmp_path / "out")
    )  # documents cut at 8 tokens: other vectors than the model was trained against
    with pytest.raises(ValueError, match=r"embedder toy: query_model .*out was trained against document vectors"):
        other.embed_queries(["modem"])
    (tmp_path / "out" / "fixgraph_model.json").unlink()
    with pytest.raises(ValueError, match=r"\(its card names none\)"):
        SentenceTransformerEmbedder(
            name="toy", model=str(base), query_backend="torch", query_model=str(tmp_path / "out")
        ).embed_queries(["modem"])
    with pytest.raises(ValueError, match="query_model needs query_backend 'torch'"):
        SentenceTransformerEmbedder(
            name="toy", model=str(base), query_model=str(tmp_path / "out"), query_backend="onnx"
        )


def test_the_trainer_refuses_an_index_it_cannot_freeze() -> None:
    from fixgraph.config import ConfigError
    from fixgraph.training.query_encoder import QueryEncoderTrainer

    embedder = {"name": "m", "kind": "sentence_transformers", "model": "x"}
    with pytest.raises(ConfigError, match="trainer t: index must be a dense retriever, got kind 'bm25'"):
        QueryEncoderTrainer("t", "d", "o", fit=FIT_1, index={"kind": "bm25"})
    with pytest.raises(ConfigError, match="index's embedder must be a sentence_transformers embedder"):
        QueryEncoderTrainer("t", "d", "o", fit=FIT_1, index={"kind": "dense", "embedder": {"kind": "hashing"}})
    with pytest.raises(ConfigError, match="already has a query_model"):
        QueryEncoderTrainer(
            "t", "d", "o", fit=FIT_1, index={"kind": "dense", "embedder": {**embedder, "query_model": "q"}}
        )
    with pytest.raises(ConfigError, match=r"trainer t: data: unknown key\(s\) negatives"):
        QueryEncoderTrainer(
            "t", "d", "o", fit=FIT_1, index={"kind": "dense", "embedder": embedder}, data={"negatives": 2}
        )


def test_ltr_dev_queries_ranks_the_stock_index_with_the_trained_query_model() -> None:
    """Its documents are dense_mpnet_blocks' (one index and cache), its queries the trainer's output, and
    an evaluation refuses it, naming the trainer, until the model is trained."""
    from fixgraph.config import ConfigError, compose
    from fixgraph.embedders.encoders import build_embedder
    from fixgraph.training.stages import require_models

    cfg = compose(["experiment=leaderboard"])  # the preset holds it and dense_dev_queries_blocks
    trainer = cfg.training.trainers.query_encoder_mpnet_dev
    assert cfg.systems.dense_dev_queries_blocks.embedder.query_model == trainer.output
    system = cfg.systems.ltr_dev_queries
    for embedder in (system.first_stage.embedder, system.first_stage.first_stage.embedder):
        assert embedder.query_model == trainer.output
        assert build_embedder(embedder).identity() == build_embedder(cfg.systems.dense_mpnet_blocks.embedder).identity()
    assert trainer.index.name == "dense_mpnet_blocks" and trainer.index.block_weight == 0.5
    assert list(trainer.data.questions) == list(cfg.training.trainers.bi_encoder_mpnet_dev.data.questions)
    if not (Path(trainer.output) / "fixgraph_model.json").exists():
        with pytest.raises(ConfigError, match=r"system ltr_dev_queries needs trainer query_encoder_mpnet_dev's model"):
            require_models(cfg, {"ltr_dev_queries": system})


def test_questions_are_embedded_as_the_embedder_embeds_queries(tmp_path: Path) -> None:
    """The trainer's query vectors are the embedder's (one path: the model's own modules), and an embedder
    with a query prefix (e5's "query: ") embeds queries with it: the trainer must too."""
    from sentence_transformers import SentenceTransformer

    from fixgraph.embedders.encoders import SentenceTransformerEmbedder
    from fixgraph.training.nets.query_encoder import QueryEncoderModule
    from tests.training_helpers import tiny_sentence_transformer

    base = tiny_sentence_transformer(tmp_path / "base", ["display", "modem"])
    model = SentenceTransformer(str(base), device="cpu")
    prefixed = QueryEncoderModule(model, {}, 1e-3, 0.1, 20.0, prefix="display ").eval()
    plain = QueryEncoderModule(model, {}, 1e-3, 0.1, 20.0).eval()
    served = SentenceTransformerEmbedder("toy", str(base), query_prefix="display ")
    questions = ["modem", "my display is dark and the modem blinks"]
    with torch.no_grad():
        torch.testing.assert_close(prefixed.embed(["modem"]), plain.embed(["display modem"]))
        assert not torch.allclose(prefixed.embed(["modem"]), plain.embed(["modem"]))
        np.testing.assert_allclose(prefixed.embed(questions).numpy(), served.embed_queries(questions), atol=1e-6)
