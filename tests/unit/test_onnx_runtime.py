"""ONNX export and onnxruntime inference against the torch model they came from (a tiny random BERT)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fixgraph.embedders import onnx_runtime

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def tiny_bert(classifier: bool = False) -> object:
    config = transformers.BertConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, num_labels=1
    )
    torch.manual_seed(0)
    model_class = transformers.BertForSequenceClassification if classifier else transformers.BertModel
    return model_class(config).eval()


def features(rows: int = 3, length: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    mask = np.ones((rows, length), dtype=np.int64)
    mask[0, 5:] = 0  # one padded row, as a tokenizer batch has
    return {
        "input_ids": rng.integers(1, 64, size=(rows, length)),
        "attention_mask": mask,
        "token_type_ids": np.zeros((rows, length), dtype=np.int64),
    }


def torch_output(model: object, feed: dict[str, np.ndarray], output: str) -> np.ndarray:
    with torch.inference_mode():
        result = model(**{k: torch.from_numpy(v) for k, v in feed.items()})  # type: ignore[operator]
    return getattr(result, output).numpy()


@pytest.mark.parametrize(("classifier", "output"), [(False, "last_hidden_state"), (True, "logits")])
def test_onnx_matches_torch_and_int8_stays_close(tmp_path: Path, classifier: bool, output: str) -> None:
    model = tiny_bert(classifier)
    feed = features()
    expected = torch_output(model, feed, output)
    fp32 = onnx_runtime.cached_model(model, "tiny", output, quantize=False, cache_dir=tmp_path)
    np.testing.assert_allclose(onnx_runtime.run(fp32, 1, feed), expected, atol=1e-4)
    assert not model.training  # the exporter must not leave dropout on for the caller's torch model
    np.testing.assert_array_equal(torch_output(model, feed, output), expected)
    int8 = onnx_runtime.cached_model(model, "tiny", output, quantize=True, cache_dir=tmp_path)
    assert int8 != fp32 and int8.name == "model.fused.int8.onnx"
    assert np.abs(onnx_runtime.run(int8, 1, feed) - expected).max() < 0.25 * np.abs(expected).max()


def op_types(path: Path) -> set[str]:
    import onnx

    return {node.op_type for node in onnx.load(str(path)).graph.node}


def test_bert_graph_is_fused_and_the_model_keeps_its_attention(tmp_path: Path) -> None:
    model = tiny_bert()
    before = model.config._attn_implementation  # type: ignore[attr-defined]
    path = onnx_runtime.cached_model(model, "tiny", "last_hidden_state", quantize=False, cache_dir=tmp_path)
    assert path.name == "model.fused.onnx"
    assert {"Attention", "SkipLayerNormalization"} <= op_types(path)  # one kernel per attention block
    assert "Softmax" in op_types(path.with_name("model.onnx"))  # the plain export, for comparison
    assert model.config._attn_implementation == before  # type: ignore[attr-defined]
    int8 = onnx_runtime.cached_model(model, "tiny", "last_hidden_state", quantize=True, cache_dir=tmp_path)
    assert {"QAttention", "MatMulInteger"} <= op_types(int8)


def test_a_model_type_without_fusions_keeps_the_plain_export(tmp_path: Path) -> None:
    config = transformers.MPNetConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    torch.manual_seed(0)
    model = transformers.MPNetModel(config).eval()
    inputs = ("input_ids", "attention_mask")
    path = onnx_runtime.cached_model(
        model, "mpnet", "last_hidden_state", quantize=False, inputs=inputs, cache_dir=tmp_path
    )
    assert path.name == "model.onnx" and not path.with_name("model.fused.onnx").exists()
    feed = {k: v for k, v in features().items() if k in inputs}
    real = feed["attention_mask"].astype(bool)
    got = onnx_runtime.run(path, 1, feed)[real]
    np.testing.assert_allclose(got, torch_output(model, feed, "last_hidden_state")[real], atol=1e-4)


def test_export_is_cached_per_model_identity(tmp_path: Path) -> None:
    model = tiny_bert()
    first = onnx_runtime.cached_model(model, "weights-a", "last_hidden_state", quantize=False, cache_dir=tmp_path)
    stamp = first.stat().st_mtime_ns
    again = onnx_runtime.cached_model(model, "weights-a", "last_hidden_state", quantize=False, cache_dir=tmp_path)
    assert again == first and again.stat().st_mtime_ns == stamp  # not exported twice
    retrained = onnx_runtime.cached_model(model, "weights-b", "last_hidden_state", quantize=False, cache_dir=tmp_path)
    assert retrained.parent != first.parent  # new weights never reuse a stale graph


def test_check_export_rejects_a_graph_that_differs_from_torch(tmp_path: Path) -> None:
    path = onnx_runtime.cached_model(tiny_bert(), "tiny", "last_hidden_state", quantize=False, cache_dir=tmp_path)
    other = tiny_bert()
    torch.nn.init.normal_(other.embeddings.word_embeddings.weight)  # type: ignore[attr-defined]
    with pytest.raises(onnx_runtime.OnnxExportError, match="BertModel does not match torch"):
        onnx_runtime.check_export(other, "last_hidden_state", path, onnx_runtime.INPUTS)


def test_check_quantized_rejects_an_int8_graph_that_lost_the_output(tmp_path: Path) -> None:
    fp32 = onnx_runtime.cached_model(tiny_bert(), "a", "last_hidden_state", quantize=False, cache_dir=tmp_path)
    other = tiny_bert()
    torch.nn.init.normal_(other.embeddings.word_embeddings.weight)  # type: ignore[attr-defined]
    unrelated = onnx_runtime.cached_model(other, "b", "last_hidden_state", quantize=True, cache_dir=tmp_path)
    with pytest.raises(onnx_runtime.OnnxExportError, match="distorts its output"):
        onnx_runtime.check_quantized(fp32, unrelated, 64, onnx_runtime.INPUTS)


def test_unknown_output_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown output 'pooler'"):
        onnx_runtime.export(tiny_bert(), "pooler", tmp_path / "m.onnx")


def test_unknown_backends_are_named() -> None:
    from fixgraph.embedders.encoders import SentenceTransformerEmbedder
    from fixgraph.retrieval.cross_encoder import CrossEncoderReranker

    with pytest.raises(ValueError, match="unknown query_backend 'tensorrt'"):
        SentenceTransformerEmbedder(name="m", model="x", query_backend="tensorrt")
    with pytest.raises(ValueError, match="query_quantize needs query_backend 'onnx'"):
        SentenceTransformerEmbedder(name="m", model="x", query_quantize=True)
    with pytest.raises(ValueError, match="unknown backend 'tensorrt'"):
        CrossEncoderReranker(name="ce", backend="tensorrt")
