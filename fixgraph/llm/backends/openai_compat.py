"""Any server speaking the OpenAI chat-completions API: vLLM, llama.cpp's server, llama-cpp-python's
server (`python -m llama_cpp.server`), LM Studio...

Servers differ in how they accept a JSON schema, so `schema_mode` says which dialect to send:
`json_schema` (OpenAI, vLLM, llama.cpp server), `json_object` (llama-cpp-python's server:
`{"type": "json_object", "schema": ...}`) or `none` (validate and retry only).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from fixgraph.io import stable_hash
from fixgraph.llm.backends.http import request_json, stream_chunk, stream_lines
from fixgraph.llm.base import LLMS, Completion, LLMError, LLMUnavailableError, StreamItem, chat_fields, drop_none

SCHEMA_MODES = ("json_schema", "json_object", "none")


def response_format(schema: dict[str, Any] | None, mode: str) -> dict[str, Any] | None:
    if schema is None or mode == "none":
        return None
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": True}}


@LLMS.register("openai_compatible")
class OpenAICompatibleLLM:
    kind = "openai_compatible"

    def __init__(
        self,
        name: str = "openai_compatible",
        model: str = "",
        base_url: str = "http://127.0.0.1:8000/v1",
        api_key: str = "",
        timeout_s: float = 120,
        schema_mode: str = "json_schema",
        model_digest: str = "",
    ) -> None:
        if schema_mode not in SCHEMA_MODES:
            raise ValueError(f"llm {name}: unknown schema_mode {schema_mode!r}; valid: {', '.join(SCHEMA_MODES)}")
        self.name, self.model, self.base_url = name, model, base_url.rstrip("/")
        self.timeout_s, self.schema_mode, self.model_digest = timeout_s, schema_mode, model_digest
        self.supports_schema = schema_mode != "none"
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def identity(self) -> str:
        """`model_digest` when configured (e.g. the GGUF sha256 the server loaded), else the server's
        own description of the model (id, owner, creation time), which the API exposes instead of a digest."""
        models = request_json("GET", f"{self.base_url}/models", self.kind, self.timeout_s, headers=self.headers)
        entries = {str(m.get("id")): m for m in models.get("data", [])}
        model = self.model or next(iter(entries), "")
        if model not in entries:
            raise LLMUnavailableError(
                f"llm {self.name}: the server at {self.base_url} does not serve model {model!r}; "
                f"it serves: {', '.join(entries) or 'nothing'}"
            )
        self.model = model
        digest = self.model_digest or stable_hash(entries[model])[:16]
        return f"openai:{model}@{digest}"

    def _payload(self, prompt: str, params: dict[str, Any]) -> dict[str, Any]:
        return drop_none(
            {
                "model": self.model or None,
                **chat_fields(prompt, params),
                "response_format": response_format(params.get("schema"), self.schema_mode),
            }
        )

    def complete(self, prompt: str, **params: Any) -> Completion:
        started = time.perf_counter()
        reply = request_json(
            "POST",
            f"{self.base_url}/chat/completions",
            self.kind,
            self.timeout_s,
            self._payload(prompt, params),
            headers=self.headers,
        )
        seconds = time.perf_counter() - started
        usage = reply.get("usage") or {}
        choices = reply.get("choices") or [{}]
        return Completion(
            text=str((choices[0].get("message") or {}).get("content") or ""),
            input_tokens=int(usage.get("prompt_tokens", 0)),
            output_tokens=int(usage.get("completion_tokens", 0)),
            seconds=seconds,
            model=str(reply.get("model", self.model)),
        )

    def stream(self, prompt: str, **params: Any) -> Iterator[StreamItem]:
        """`stream: true` chat completions: SSE `data:` lines of deltas until `data: [DONE]`; the usage
        comes in a last chunk when the server honours `stream_options.include_usage`, otherwise the
        output is counted as one token per delta (what llama.cpp and vLLM send) and the prompt as 0."""
        started = time.perf_counter()
        url = f"{self.base_url}/chat/completions"
        payload = {**self._payload(prompt, params), "stream": True, "stream_options": {"include_usage": True}}
        parts: list[str] = []
        usage: dict[str, Any] = {}
        model = self.model
        deltas = 0
        for line in stream_lines(url, self.kind, self.timeout_s, payload, headers=self.headers):
            if not line.startswith("data:"):
                continue  # SSE comments and event names
            data = line[5:].strip()
            if data == "[DONE]":
                yield Completion(
                    text="".join(parts),
                    input_tokens=int(usage.get("prompt_tokens", 0)),
                    output_tokens=int(usage.get("completion_tokens", deltas)),
                    seconds=time.perf_counter() - started,
                    model=model,
                )
                return
            chunk = stream_chunk(data, url, self.kind, "an event")
            usage = chunk.get("usage") or usage
            model = str(chunk.get("model") or model)
            for choice in chunk.get("choices") or []:
                delta = str((choice.get("delta") or {}).get("content") or "")
                if delta:
                    deltas += 1
                    parts.append(delta)
                    yield delta
        raise LLMError(f"llm backend {self.kind}: the stream from {url} ended without `data: [DONE]`")
