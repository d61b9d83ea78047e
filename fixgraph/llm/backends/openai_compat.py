"""Any server speaking the OpenAI chat-completions API: vLLM, llama.cpp's server, llama-cpp-python's
server (`python -m llama_cpp.server`), LM Studio...

Servers differ in how they accept a JSON schema, so `schema_mode` says which dialect to send:
`json_schema` (OpenAI, vLLM, llama.cpp server), `json_object` (llama-cpp-python's server:
`{"type": "json_object", "schema": ...}`) or `none` (validate and retry only).
"""

from __future__ import annotations

import time
from typing import Any

from fixgraph.io import stable_hash
from fixgraph.llm.backends.http import request_json
from fixgraph.llm.base import LLMS, Completion, LLMUnavailableError, chat_messages, drop_none

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

    def complete(self, prompt: str, **params: Any) -> Completion:
        payload = drop_none(
            {
                "model": self.model or None,
                "messages": chat_messages(prompt, params.get("system")),
                "temperature": params.get("temperature"),
                "max_tokens": params.get("max_tokens"),
                "seed": params.get("seed"),
                "top_p": params.get("top_p"),
                "stop": params.get("stop"),
                "response_format": response_format(params.get("schema"), self.schema_mode),
            }
        )
        started = time.perf_counter()
        reply = request_json(
            "POST", f"{self.base_url}/chat/completions", self.kind, self.timeout_s, payload, headers=self.headers
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
