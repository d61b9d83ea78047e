"""peft adapter -> llama.cpp LoRA GGUF (fixgraph/llm/lora_gguf.py) on toy files; the agreement with
peft on the real model is tests/integration/test_lora_gguf.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")


def _base(path: Path, out: int = 6, inp: int = 4) -> Path:
    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_tensor("blk.0.attn_q.weight", np.zeros((out, inp), dtype=np.float32))  # ne = [in, out]
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _adapter(
    folder: Path, a_shape: tuple[int, int] = (2, 4), b_shape: tuple[int, int] = (6, 2), **config: object
) -> Path:
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    prefix = "base_model.model.model.layers.0.self_attn.q_proj"
    rng = np.random.default_rng(0)
    save_file(
        {
            f"{prefix}.lora_A.weight": rng.normal(size=a_shape).astype(np.float32),
            f"{prefix}.lora_B.weight": rng.normal(size=b_shape).astype(np.float32),
        },
        str(folder / "adapter_model.safetensors"),
    )
    settings = {"peft_type": "LORA", "r": 2, "lora_alpha": 4, "bias": "none", **config}
    (folder / "adapter_config.json").write_text(json.dumps(settings))
    return folder


def test_the_adapter_becomes_a_llama_cpp_lora_file(tmp_path: Path) -> None:
    from fixgraph.llm.lora_gguf import adapter_gguf, lora_tensors

    adapter = _adapter(tmp_path / "adapter")
    path = adapter_gguf(adapter, _base(tmp_path / "base.gguf"), tmp_path / "models")
    assert path.parent == tmp_path / "models" / "lora" and not list(adapter.glob("*.gguf"))  # not in the DVC output
    assert not list(adapter.glob("*.sha256"))  # no hash sidecar written into it either
    reader = gguf.GGUFReader(str(path))
    fields = {name: bytes(f.parts[-1]) for name, f in reader.fields.items()}
    assert fields["general.type"] == b"adapter" and fields["adapter.type"] == b"lora"
    assert fields["general.architecture"] == b"qwen2"
    assert float(reader.fields["adapter.lora.alpha"].parts[-1][0]) == 4.0
    tensors = {t.name: t for t in reader.tensors}
    assert set(tensors) == {"blk.0.attn_q.weight.lora_a", "blk.0.attn_q.weight.lora_b"}
    assert [int(n) for n in tensors["blk.0.attn_q.weight.lora_a"].shape] == [4, 2]  # ne: in x r, as llama.cpp checks
    assert [int(n) for n in tensors["blk.0.attn_q.weight.lora_b"].shape] == [2, 6]  # r x out
    expected = lora_tensors(adapter)["blk.0.attn_q.weight.lora_b"]
    assert np.array_equal(np.asarray(tensors["blk.0.attn_q.weight.lora_b"].data), expected)


@pytest.mark.parametrize(
    ("config", "message"),
    [({"use_dora": True}, "use_dora is set"), ({"peft_type": "IA3"}, "only LORA"), ({"bias": "all"}, "trained biases")],
)
def test_adapters_llama_cpp_cannot_serve_are_refused(tmp_path: Path, config: dict[str, object], message: str) -> None:
    from fixgraph.llm.lora_gguf import AdapterConversionError, adapter_gguf

    adapter = _adapter(tmp_path / "adapter", **config)
    with pytest.raises(AdapterConversionError, match=message):
        adapter_gguf(adapter, _base(tmp_path / "base.gguf"), tmp_path / "models")
    assert not (tmp_path / "models" / "lora").exists()


def test_an_adapter_of_another_base_model_is_refused(tmp_path: Path) -> None:
    from fixgraph.llm.lora_gguf import AdapterConversionError, adapter_gguf

    adapter = _adapter(tmp_path / "adapter", a_shape=(2, 8), b_shape=(6, 2))  # trained on inputs of 8, not 4
    with pytest.raises(AdapterConversionError, match="was it trained on this base model"):
        adapter_gguf(adapter, _base(tmp_path / "base.gguf"), tmp_path / "models")


def test_the_llama_cpp_backend_caches_adapter_replies_apart(tmp_path: Path) -> None:
    from fixgraph.llm.backends.llamacpp import LlamaCppLLM
    from fixgraph.llm.base import LLMUnavailableError

    base = _base(tmp_path / "base.gguf")
    adapter = _adapter(tmp_path / "adapter")
    plain = LlamaCppLLM(model=str(base))
    tuned = LlamaCppLLM(model=str(base), adapter=str(adapter))
    assert plain.identity() != tuned.identity()
    assert not list(adapter.glob("*.sha256"))  # the adapter folder is a stage output: nothing written into it
    retrained = _adapter(tmp_path / "adapter2", b_shape=(6, 2), r=2)
    (retrained / "adapter_model.safetensors").write_bytes(b"other weights")
    assert LlamaCppLLM(model=str(base), adapter=str(retrained)).identity() != tuned.identity()
    with pytest.raises(LLMUnavailableError, match="no adapter"):
        LlamaCppLLM(model=str(base), adapter=str(tmp_path / "missing")).identity()
