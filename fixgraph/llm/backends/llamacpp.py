"""llama.cpp in-process through llama-cpp-python: GGUF models, chat templates, and JSON-schema
constrained decoding (the schema is compiled to a grammar, so the answer always parses)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from fixgraph.llm.base import LLMS, Completion, LLMUnavailableError, chat_messages, drop_none
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
    ) -> None:
        if not model:
            raise ValueError(f"llm {name}: needs a `model` (a .gguf path or a name from `fixgraph llm list`)")
        self.name, self.model, self.model_dir = name, model, Path(model_dir)
        self.n_ctx, self.n_threads, self.seed = n_ctx, n_threads, seed
        self._llama: Any = None
        self._lock = threading.Lock()  # one llama.cpp context is not safe to share between threads

    @property
    def path(self) -> Path:
        return resolve_gguf(self.model, self.model_dir)

    def identity(self) -> str:
        return f"gguf:sha256:{file_sha256(self.path)}"

    def _load(self) -> Any:
        if self._llama is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:
                raise LLMUnavailableError(
                    f"llm {self.name}: llama-cpp-python is not installed; `pip install -e '.[llm]'` "
                    "(it compiles llama.cpp, ~11 min on 2 cores)"
                ) from exc
            self._llama = Llama(
                model_path=str(self.path), n_ctx=self.n_ctx, n_threads=self.n_threads, seed=self.seed, verbose=False
            )
        return self._llama

    def complete(self, prompt: str, **params: Any) -> Completion:
        schema = params.get("schema")
        request = drop_none(
            {
                "messages": chat_messages(prompt, params.get("system")),
                "temperature": params.get("temperature"),
                "max_tokens": params.get("max_tokens"),
                "seed": params.get("seed"),
                "top_p": params.get("top_p"),
                "stop": params.get("stop"),
                "response_format": {"type": "json_object", "schema": schema} if schema is not None else None,
            }
        )
        with self._lock:
            llama = self._load()
            started = time.perf_counter()
            reply = llama.create_chat_completion(**request)
            seconds = time.perf_counter() - started
        usage = reply.get("usage") or {}
        return Completion(
            text=str(reply["choices"][0]["message"].get("content") or ""),
            input_tokens=int(usage.get("prompt_tokens", 0)),
            output_tokens=int(usage.get("completion_tokens", 0)),
            seconds=seconds,
            model=self.model,
        )
