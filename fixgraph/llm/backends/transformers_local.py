"""Hugging Face transformers in-process: a model folder, or a GGUF file that transformers dequantises
(slow to load, 40-90 s). No constrained decoding: structured answers are validated and retried.

`quantization: nf4` loads the model 4-bit with bitsandbytes, and `adapter:` applies a peft LoRA adapter
(what `fixgraph train --trainer qwen_coder_05b_qlora` trains): `llm=qwen_coder_05b_qlora` serves it to
every LLM consumer. A GGUF is then read from its safetensors export (llm/hf_export.py), made once."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from fixgraph.io import sha256_file, stable_hash
from fixgraph.llm.base import LLMS, Completion, LLMUnavailableError, chat_messages
from fixgraph.llm.gguf import file_sha256, resolve_gguf

DEVICES = ("cpu", "cuda", "auto")  # auto: the GPU when torch sees one


@LLMS.register("transformers")
class TransformersLLM:
    kind = "transformers"
    supports_schema = False

    def __init__(
        self,
        name: str = "transformers",
        model: str = "",
        model_dir: str = "models",
        dtype: str = "bfloat16",
        quantization: str | None = None,
        adapter: str | None = None,
        device: str = "cpu",
    ) -> None:
        if not model:
            raise ValueError(f"llm {name}: needs a `model` (a model folder, a .gguf file or a catalog name)")
        if quantization is not None:
            from fixgraph.llm.hf_export import QUANTIZATIONS

            if quantization not in QUANTIZATIONS:
                raise ValueError(
                    f"llm {name}: unknown quantization {quantization!r}; valid: {', '.join(QUANTIZATIONS)}"
                )
        if device not in DEVICES:
            raise ValueError(f"llm {name}: unknown device {device!r}; valid: {', '.join(DEVICES)}")
        self.name, self.model, self.model_dir, self.dtype = name, model, Path(model_dir), dtype
        self.device = device
        self.quantization, self.adapter = quantization, adapter
        self._loaded: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    def _source(self) -> tuple[Path, str | None]:
        """(folder or file's folder, gguf file name or None)."""
        folder = Path(self.model).expanduser()
        if folder.is_dir():
            return folder, None
        gguf = resolve_gguf(self.model, self.model_dir)
        return gguf.parent, gguf.name

    def identity(self) -> str:
        base = self._base_identity()
        if self.quantization is None and self.adapter is None and self.device == "cpu":
            return base
        parts = {"base": base, "quantization": self.quantization, "adapter": self._adapter_identity()}
        if self.device != "cpu":  # GPU kernels round differently: their replies are cached apart
            parts["device"] = self.device
        return stable_hash(parts)

    def _adapter_identity(self) -> str | None:
        if self.adapter is None:
            return None
        weights = sorted(Path(self.adapter).glob("adapter_model.*"))
        if not weights:
            raise LLMUnavailableError(
                f"llm {self.name}: no adapter in {self.adapter}; train it with `fixgraph train --trainer {self.name}`"
            )
        return stable_hash({w.name: sha256_file(w) for w in weights})  # no sidecar in the stage output

    def _base_identity(self) -> str:
        folder, gguf = self._source()
        if gguf is not None:
            return f"gguf:sha256:{file_sha256(folder / gguf)}"
        weights = sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin"))
        if not weights:
            raise LLMUnavailableError(f"llm {self.name}: no weights (*.safetensors, *.bin) in {folder}")
        return "hf:" + stable_hash({w.name: file_sha256(w) for w in weights})[:32] + f":{self.dtype}"

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            folder, gguf = self._source()
            device = "cuda" if self.device != "cpu" and torch.cuda.is_available() else "cpu"
            if self.device == "cuda" and device == "cpu":
                raise LLMUnavailableError(f"llm {self.name}: device cuda, but torch sees no GPU")
            if self.quantization is not None or self.adapter is not None:
                from fixgraph.llm.hf_export import hf_folder, load_causal_lm

                self._adapter_identity()  # a clear error when the adapter is missing
                tokenizer, model = load_causal_lm(
                    hf_folder(self.model, self.model_dir), self.dtype, self.quantization, device
                )
                if self.adapter is not None:
                    from peft import PeftModel

                    model = PeftModel.from_pretrained(model, self.adapter)
            else:
                extra = {"gguf_file": gguf} if gguf else {}
                tokenizer = AutoTokenizer.from_pretrained(str(folder), **extra)
                placed = {"device_map": device} if device != "cpu" else {}
                model = AutoModelForCausalLM.from_pretrained(
                    str(folder), dtype=getattr(torch, self.dtype), **extra, **placed
                )
            model.eval()
            self._loaded = (tokenizer, model)
        return self._loaded

    def complete(self, prompt: str, **params: Any) -> Completion:
        import torch

        with self._lock:
            tokenizer, model = self._load()
            messages = chat_messages(prompt, params.get("system"))
            inputs = tokenizer.apply_chat_template(
                messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
            ).to(model.device)
            temperature = float(params.get("temperature") or 0.0)
            if params.get("seed") is not None:
                torch.manual_seed(int(params["seed"]))
            sampling = {"do_sample": True, "temperature": temperature} if temperature > 0 else {"do_sample": False}
            started = time.perf_counter()
            with torch.no_grad():
                output = model.generate(
                    **inputs,
                    max_new_tokens=int(params.get("max_tokens") or 256),
                    pad_token_id=tokenizer.eos_token_id,
                    **sampling,
                )
            seconds = time.perf_counter() - started
        prompt_len = int(inputs["input_ids"].shape[1])
        new_tokens = output[0][prompt_len:]
        text = tokenizer.decode(new_tokens, skip_special_tokens=True)
        return Completion(text, prompt_len, int(new_tokens.shape[0]), seconds, model=self.model)
