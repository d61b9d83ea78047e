"""A GGUF model as a Hugging Face safetensors folder, exported once, and loaded 4-bit (NF4) for QLoRA.

transformers dequantises a GGUF file on load (40-90 s for the 0.5B model here); doing that on every
training run or server start would waste minutes, so the dequantised model is saved once as safetensors
next to the GGUF (`<model_dir>/hf/<name>/`), with the GGUF's sha256 in `fixgraph_export.json`: a folder
exported from another file is refused and redone.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fixgraph.io import atomic_dir, read_json, write_json
from fixgraph.llm.gguf import file_sha256, resolve_gguf

log = logging.getLogger(__name__)
EXPORT_MARKER = "fixgraph_export.json"
QUANTIZATIONS = ("nf4", "fp4")


def hf_folder(model: str, model_dir: Path, dtype: str = "bfloat16") -> Path:
    """A transformers folder for `model`: a folder as it is, or a GGUF (path or catalog name) exported once."""
    folder = Path(model).expanduser()
    if folder.is_dir():
        return folder
    gguf = resolve_gguf(model, model_dir)
    target = model_dir / "hf" / gguf.stem
    digest = file_sha256(gguf)
    marker = target / EXPORT_MARKER
    if marker.exists() and read_json(marker).get("gguf_sha256") == digest and read_json(marker).get("dtype") == dtype:
        return target
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    log.info("exporting %s to safetensors (%s) in %s, once", gguf.name, dtype, target)
    with atomic_dir(target) as tmp:
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        loaded = AutoModelForCausalLM.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32, quantization_config=GgufConfig(dequantize=True)
        )
        # a plain model with the unpacked weights: transformers will not save one still marked as GGUF
        config = loaded.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        network = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
        network.load_state_dict(loaded.state_dict())
        network.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        write_json(tmp / EXPORT_MARKER, {"gguf": gguf.name, "gguf_sha256": digest, "dtype": dtype})
    return target


def quantization_config(quantization: str, compute_dtype: str) -> Any:
    """bitsandbytes 4-bit: NF4 (QLoRA's data type) or FP4, double quantisation of the scales."""
    import torch
    from transformers import BitsAndBytesConfig

    if quantization not in QUANTIZATIONS:
        raise ValueError(f"unknown quantization {quantization!r}; valid: {', '.join(QUANTIZATIONS)}")
    return BitsAndBytesConfig(
        load_in_4bit=True,
        bnb_4bit_quant_type=quantization,
        bnb_4bit_use_double_quant=True,
        bnb_4bit_compute_dtype=getattr(torch, compute_dtype),
    )


def load_causal_lm(folder: Path, dtype: str, quantization: str | None, device: str = "cpu") -> tuple[Any, Any]:
    """(tokenizer, model) from a transformers folder, 4-bit when `quantization` is set."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    extra: dict[str, Any] = {}
    if quantization:
        extra = {"quantization_config": quantization_config(quantization, dtype), "device_map": device}
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=getattr(torch, dtype), **extra)
    return tokenizer, model


def count_4bit_layers(model: Any) -> int:
    """How many Linear layers hold bitsandbytes 4-bit weights (what a QLoRA test checks)."""
    import bitsandbytes as bnb

    return sum(isinstance(m, bnb.nn.Linear4bit) for m in model.modules())
