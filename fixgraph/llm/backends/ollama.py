"""Ollama through its native API (/api/chat), with JSON-schema constrained output via `format`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from fixgraph.llm.backends.http import request_json, stream_chunk, stream_lines
from fixgraph.llm.base import LLMS, Completion, LLMError, LLMUnavailableError, StreamItem, chat_messages, drop_none


@LLMS.register("ollama")
class OllamaLLM:
    kind = "ollama"
    supports_schema = True  # ollama >= 0.5 compiles `format: <schema>` into a grammar

    def __init__(
        self,
        name: str = "ollama",
        model: str = "",
        host: str = "http://127.0.0.1:11434",
        timeout_s: float = 120,
    ) -> None:
        if not model:
            raise ValueError(f"llm {name}: needs a `model` (an ollama model tag, e.g. qwen2.5-coder:1.5b)")
        self.name, self.model, self.host, self.timeout_s = name, model, host.rstrip("/"), timeout_s

    def identity(self) -> str:
        """The digest ollama reports for the model tag: it changes when the weights do."""
        tags = request_json("GET", f"{self.host}/api/tags", self.kind, self.timeout_s)
        for entry in tags.get("models", []):
            if self.model in (entry.get("name"), entry.get("model")):
                return f"ollama:{self.model}@{entry.get('digest', '')}"
        raise LLMUnavailableError(
            f"llm {self.name}: model {self.model!r} is not available on the ollama server at {self.host}; "
            f"run `ollama pull {self.model}`"
        )

    def _payload(self, prompt: str, params: dict[str, Any], stream: bool) -> dict[str, Any]:
        options = drop_none(
            {
                "temperature": params.get("temperature"),
                "num_predict": params.get("max_tokens"),
                "seed": params.get("seed"),
                "top_p": params.get("top_p"),
                "num_ctx": params.get("num_ctx"),
                "stop": params.get("stop"),
            }
        )
        return drop_none(
            {
                "model": self.model,
                "messages": chat_messages(prompt, params.get("system")),
                "stream": stream,
                "format": params.get("schema"),
                "options": options,
            }
        )

    def complete(self, prompt: str, **params: Any) -> Completion:
        started = time.perf_counter()
        reply = request_json(
            "POST", f"{self.host}/api/chat", self.kind, self.timeout_s, self._payload(prompt, params, False)
        )
        seconds = time.perf_counter() - started
        return Completion(
            text=str(reply.get("message", {}).get("content", "")),
            input_tokens=int(reply.get("prompt_eval_count", 0)),
            output_tokens=int(reply.get("eval_count", 0)),
            seconds=seconds,
            model=self.model,
        )

    def stream(self, prompt: str, **params: Any) -> Iterator[StreamItem]:
        """/api/chat with `stream: true`: one JSON object per line, the last (`done: true`) with the counts."""
        started = time.perf_counter()
        url = f"{self.host}/api/chat"
        parts: list[str] = []
        for line in stream_lines(url, self.kind, self.timeout_s, self._payload(prompt, params, True)):
            chunk = stream_chunk(line, url, self.kind, "a line")
            delta = str((chunk.get("message") or {}).get("content") or "")
            if delta:
                parts.append(delta)
                yield delta
            if chunk.get("done"):
                yield Completion(
                    text="".join(parts),
                    input_tokens=int(chunk.get("prompt_eval_count", 0)),
                    output_tokens=int(chunk.get("eval_count", 0)),
                    seconds=time.perf_counter() - started,
                    model=self.model,
                )
                return
        raise LLMError(f"llm backend {self.kind}: the stream from {url} ended before `done`")
