"""The peft adapter served by llama.cpp (slow, real 0.5B model): the converted LoRA must move llama.cpp's
next-token logits the way peft moves transformers' logits on the same weights. A wrong tensor name,
a transposed A/B or a wrong alpha / r scale would break the agreement (or llama.cpp's loading)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.integration.conftest import GGUF, REAL_MODEL

pytestmark = REAL_MODEL
PROMPT = "How do I change the desktop background?"


def _random_adapter(base_folder: Path, out: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(base_folder), dtype=torch.float32)
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=32, target_modules=targets))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:  # peft starts B at zero: a no-op adapter would prove nothing
                param.normal_(0.0, 0.004)
    model.save_pretrained(str(out))


def _hf_logits(base_folder: Path, adapter: Path | None) -> np.ndarray:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from fixgraph.llm.base import chat_messages

    tokenizer = AutoTokenizer.from_pretrained(str(base_folder))
    model = AutoModelForCausalLM.from_pretrained(str(base_folder), dtype=torch.float32)
    if adapter is not None:
        model = PeftModel.from_pretrained(model, str(adapter))
    ids = tokenizer.apply_chat_template(
        chat_messages(PROMPT, None), add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    with torch.no_grad():
        return np.asarray(model(**ids).logits[0, -1].double().numpy())


def _llama_logits(llm: object) -> np.ndarray:
    """llama.cpp's full next-token logits after the chat prompt (what a logits processor sees)."""
    from llama_cpp import LogitsProcessorList

    from fixgraph.llm.base import chat_messages

    seen: list[np.ndarray] = []

    def capture(input_ids: object, scores: np.ndarray) -> np.ndarray:
        seen.append(np.array(scores, dtype=np.float64))
        return scores

    llama = llm._load()  # type: ignore[attr-defined]
    llama.create_chat_completion(
        messages=chat_messages(PROMPT, None),
        max_tokens=1,
        temperature=0.0,
        logits_processor=LogitsProcessorList([capture]),
    )
    return seen[0]


def test_the_converted_adapter_moves_llama_cpp_like_peft_moves_transformers(tmp_path: Path) -> None:
    from fixgraph.llm.backends.llamacpp import LlamaCppLLM
    from fixgraph.llm.hf_export import hf_folder
    from fixgraph.llm.lora_gguf import adapter_gguf

    if not GGUF.exists():
        pytest.skip("the 0.5B GGUF is not assembled (`make llm`)")
    base_folder = hf_folder(str(GGUF), GGUF.parent)
    adapter = tmp_path / "adapter"
    _random_adapter(base_folder, adapter)
    converted = adapter_gguf(adapter, GGUF, tmp_path / "models")
    assert converted.exists() and adapter_gguf(adapter, GGUF, tmp_path / "models") == converted  # once
    hf_delta = _hf_logits(base_folder, adapter) - _hf_logits(base_folder, None)

    def first_logits(with_adapter: bool) -> np.ndarray:
        llm = LlamaCppLLM(
            model=str(GGUF), model_dir=str(tmp_path / "models"), adapter=str(adapter) if with_adapter else None
        )
        return _llama_logits(llm)

    llama_delta = first_logits(True) - first_logits(False)
    assert np.abs(hf_delta).max() > 0.5  # the adapter matters
    correlation = float(np.corrcoef(hf_delta, llama_delta)[0, 1])
    scale = float(np.dot(hf_delta, llama_delta) / np.dot(hf_delta, hf_delta))
    assert correlation > 0.9, correlation
    assert 0.8 < scale < 1.25, scale  # llama.cpp scales by alpha / r like peft
