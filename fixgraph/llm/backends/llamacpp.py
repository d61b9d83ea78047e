"""llama.cpp in-process through llama-cpp-python: GGUF models, chat templates, JSON-schema
constrained decoding (the schema is compiled to a grammar, so the answer always parses), and the
log-probabilities of the first generated token (`logprobs=True, top_logprobs=k`).

llama-cpp-python returns log-probabilities only for models loaded with `logits_all=True`, which keeps
n_ctx x vocabulary floats (2.5 GB for Qwen2.5's 152k tokens at n_ctx 4096); a logits processor sees the
same next-token logits at no cost, so the first step's are read there and log-softmaxed here."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fixgraph.io import sha256_file, stable_hash
from fixgraph.llm.base import LLMS, Completion, LLMUnavailableError, StreamItem, chat_fields, drop_none
from fixgraph.llm.gguf import file_sha256, resolve_gguf


@LLMS.register("llamacpp")
class LlamaCppLLM:
    kind = "llamacpp"
    supports_schema = True

    def __init__(
        self,
        name: str = "llamacpp",
        model: str = "",
        model_dir: str = "models",
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        adapter: str | None = None,
    ) -> None:
        if not model:
            raise ValueError(f"llm {name}: needs a `model` (a .gguf path or a name from `fixgraph llm list`)")
        self.name, self.model, self.model_dir = name, model, Path(model_dir)
        self.n_ctx, self.n_threads, self.seed = n_ctx, n_threads, seed
        self.adapter = adapter  # a peft LoRA folder (`fixgraph train`), served through llama.cpp's LoRA support
        self._llama: Any = None
        self._lock = threading.Lock()  # one llama.cpp context is not safe to share between threads

    @property
    def path(self) -> Path:
        return resolve_gguf(self.model, self.model_dir)

    def identity(self) -> str:
        base = f"gguf:sha256:{file_sha256(self.path)}"
        if self.adapter is None:
            return base
        # sha256_file, not file_sha256: its sidecar would land in the adapter folder, a stage output
        return stable_hash({"base": base, "lora": sha256_file(self._adapter_weights())})

    def _adapter_weights(self) -> Path:
        from fixgraph.llm.lora_gguf import WEIGHTS

        weights = Path(str(self.adapter)) / WEIGHTS
        if not weights.exists():
            raise LLMUnavailableError(f"llm {self.name}: no adapter {weights}; train it with `fixgraph train`")
        return weights

    def _load(self) -> Any:
        if self._llama is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise LLMUnavailableError(
                    f"llm {self.name}: llama-cpp-python is not installed; `pip install -e '.[llm]'` "
                    "(it compiles llama.cpp, ~11 min on 2 cores)"
                ) from exc
            lora_path = None
            if self.adapter is not None:
                from fixgraph.llm.lora_gguf import adapter_gguf

                self._adapter_weights()  # a clear error when it is missing
                lora_path = str(adapter_gguf(Path(self.adapter), self.path, self.model_dir))
            self._llama = Llama(
                model_path=str(self.path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                seed=self.seed,
                verbose=False,
                lora_path=lora_path,
            )
        return self._llama

    def complete(self, prompt: str, **params: Any) -> Completion:
        first_logits: list[np.ndarray] = []

        def capture(input_ids: Any, scores: Any) -> Any:
            if not first_logits:
                first_logits.append(np.array(scores, dtype=np.float64))
            return scores

        request = chat_request(prompt, params)
        top_k = int(params.get("top_logprobs") or 0) if params.get("logprobs") else 0
        with self._lock:
            llama = self._load()
            if top_k:
                from llama_cpp import LogitsProcessorList

                request["logits_processor"] = LogitsProcessorList([capture])
            started = time.perf_counter()
            reply = llama.create_chat_completion(**request)
            seconds = time.perf_counter() - started
            top = first_token_logprobs(first_logits[0], top_k, llama.detokenize) if first_logits else None
        usage = reply.get("usage") or {}
        return Completion(
            text=str(reply["choices"][0]["message"].get("content") or ""),
            input_tokens=int(usage.get("prompt_tokens", 0)),
            output_tokens=int(usage.get("completion_tokens", 0)),
            seconds=seconds,
            model=self.model,
            top_logprobs=top,
        )

    def stream(self, prompt: str, **params: Any) -> Iterator[StreamItem]:
        """Token by token from llama.cpp's own stream. The context is held until the stream ends or is
        closed: closing it stops decoding at the next token (llama-cpp-python decodes lazily)."""
        with self._lock:
            llama = self._load()
            started = time.perf_counter()
            chunks = llama.create_chat_completion(**chat_request(prompt, params), stream=True)
            parts: list[str] = []
            deltas = 0
            try:
                for chunk in chunks:
                    deltas += 1  # one chunk per decoded token (the last carries only finish_reason)
                    delta = str((chunk["choices"][0].get("delta") or {}).get("content") or "")
                    if delta:
                        parts.append(delta)
                        yield delta
            finally:
                chunks.close()
            output_tokens = max(deltas - 1, 0)
            # the context holds prompt + generated tokens once decoding ends
            input_tokens = max(int(getattr(llama, "n_tokens", 0)) - output_tokens, 0)
        yield Completion("".join(parts), input_tokens, output_tokens, time.perf_counter() - started, model=self.model)


def chat_request(prompt: str, params: dict[str, Any]) -> dict[str, Any]:
    """create_chat_completion's arguments for a prompt and the client's request parameters."""
    schema = params.get("schema")
    return drop_none(
        {
            **chat_fields(prompt, params),
            "response_format": {"type": "json_object", "schema": schema} if schema is not None else None,
        }
    )


def first_token_logprobs(logits: np.ndarray, k: int, detokenize: Any) -> dict[str, float]:
    """The `k` most likely tokens' log-probabilities (log-softmax of the logits), by token text; tokens
    that decode to the same text (e.g. two byte-level spellings) keep the larger one."""
    shifted = logits - logits.max()
    logprobs = shifted - np.log(np.exp(shifted).sum())
    top: dict[str, float] = {}
    for token in np.argsort(-logprobs, kind="stable")[:k]:
        text = detokenize([int(token)]).decode("utf-8", errors="replace")
        top[text] = max(top.get(text, -np.inf), float(logprobs[token]))
    return top
