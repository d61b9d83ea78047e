"""A peft LoRA adapter as a llama.cpp LoRA file, so the GGUF base model serves it at llama.cpp speed.

The QLoRA trainer saves peft adapters (`adapter_model.safetensors` + `adapter_config.json`); llama.cpp
reads adapters as GGUF files: `general.type` "adapter", `adapter.type` "lora", `adapter.lora.alpha`, and
per adapted projection two tensors named after the base model's tensor, `<tensor>.lora_a` (r x in) and
`<tensor>.lora_b` (out x r), which are peft's `lora_A` / `lora_B` weights as they are. llama.cpp scales
their product by alpha / r, as peft does. The file is written once per adapter (by the weights' sha256)
under `<model_dir>/lora/`, never into the adapter folder (a DVC output).

Only plain LoRA on the attention and MLP projections of a llama-family (Qwen2) model is converted;
anything else (DoRA, rsLoRA, extra trained modules, embeddings) is refused with the reason.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fixgraph.io import atomic_path, read_json, sha256_file

WEIGHTS = "adapter_model.safetensors"
# peft module path -> llama.cpp tensor name (blk.<layer>.<name>.weight)
PROJECTIONS = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
PEFT_NAME = re.compile(r"\.layers\.(\d+)\.(" + "|".join(re.escape(p) for p in PROJECTIONS) + r")\.lora_([AB])\.weight$")


class AdapterConversionError(ValueError):
    pass


def _check_config(adapter: Path) -> dict[str, Any]:
    config = read_json(adapter / "adapter_config.json")
    problems = []
    if config.get("peft_type") != "LORA":
        problems.append(f"peft_type {config.get('peft_type')!r} (only LORA)")
    for flag in ("use_dora", "use_rslora"):
        if config.get(flag):
            problems.append(f"{flag} is set")
    if config.get("modules_to_save"):
        problems.append(f"modules_to_save {config['modules_to_save']} (fully trained modules)")
    if config.get("bias", "none") != "none":
        problems.append(f"bias {config['bias']!r} (trained biases)")
    if problems:
        raise AdapterConversionError(f"{adapter}: cannot serve this adapter with llama.cpp: {'; '.join(problems)}")
    return config


def lora_tensors(adapter: Path) -> dict[str, Any]:
    """llama.cpp tensor name -> float32 array, from the adapter's safetensors."""
    from safetensors.numpy import load_file

    tensors: dict[str, Any] = {}
    for name, value in load_file(str(adapter / WEIGHTS)).items():
        match = PEFT_NAME.search(name)
        if match is None:
            raise AdapterConversionError(f"{adapter / WEIGHTS}: tensor {name!r} is not a LoRA A/B of a projection")
        layer, module, side = match.groups()
        tensors[f"blk.{layer}.{PROJECTIONS[module]}.weight.lora_{side.lower()}"] = value.astype("float32")
    return tensors


def adapter_gguf(adapter: Path, base_gguf: Path, model_dir: Path) -> Path:
    """The llama.cpp LoRA file of `adapter` for `base_gguf` (written once, by the weights' sha256)."""
    import gguf

    if not (adapter / WEIGHTS).exists():
        raise FileNotFoundError(f"{adapter}: no {WEIGHTS} (train it with `fixgraph train`)")
    target = model_dir / "lora" / f"{sha256_file(adapter / WEIGHTS)[:16]}.gguf"
    if target.exists():
        return target
    config = _check_config(adapter)
    tensors = lora_tensors(adapter)
    base = gguf.GGUFReader(str(base_gguf))
    shapes = {t.name: [int(n) for n in t.shape] for t in base.tensors}  # [in, out]
    for name, value in tensors.items():
        if name.endswith(".lora_a"):
            base_name = name.removesuffix(".lora_a")
            b = tensors.get(base_name + ".lora_b")
            wanted = shapes.get(base_name)
            if b is None or wanted is None or wanted != [value.shape[1], b.shape[0]]:
                raise AdapterConversionError(
                    f"{adapter}: {name} {list(value.shape)} does not fit {base_gguf.name} ({base_name}: {wanted}); "
                    "was it trained on this base model?"
                )
    architecture = bytes(base.fields["general.architecture"].parts[-1]).decode()
    target.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(target) as tmp:
        writer = gguf.GGUFWriter(str(tmp), architecture)
        writer.add_type(gguf.GGUFType.ADAPTER)
        writer.add_string(gguf.Keys.Adapter.TYPE, "lora")
        writer.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(config["lora_alpha"]))
        for name in sorted(tensors):
            writer.add_tensor(name, tensors[name])
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    return target
