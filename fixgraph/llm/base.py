"""The LLM client interface and the registry behind the `llm` Hydra group.

Every backend (ollama, openai-compatible servers, llama.cpp in-process, transformers in-process, fake)
implements `complete(prompt, **params) -> Completion`; backends that can stream also implement
`stream(prompt, **params)`, which yields text deltas as the model produces them and, last, the
`Completion` of the whole reply (its text and token counts). Closing the iterator early stops the
generation (the HTTP connection is closed, llama.cpp stops decoding). Structured output is requested with
`schema=<JSON schema>`: backends with constrained decoding (`supports_schema`) enforce it while
decoding; `fixgraph.llm.structured` validates every answer and retries once with the error for the rest.
`build_llm(cfg)` wraps the backend in `LLMClient` (cache, concurrency limit, token accounting).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fixgraph.registry import Registry


class LLMError(RuntimeError):
    """An LLM call that failed for a reason outside the caller's control (timeout, bad server reply)."""


class LLMUnavailableError(LLMError):
    """The configured server cannot be reached or the model cannot be found; the message says where."""


@dataclass(frozen=True)
class Completion:
    text: str
    input_tokens: int
    output_tokens: int
    seconds: float
    cached: bool = False
    model: str = ""  # identity of the model that produced the text
    # log-probabilities of the most likely first tokens (token text -> logprob), when the request asked
    # for `logprobs` and the backend can give them; rerankers read P(yes) from it
    top_logprobs: dict[str, float] | None = None


class LLM(Protocol):
    name: str
    kind: str
    supports_schema: bool  # constrained decoding against a JSON schema while generating

    def identity(self) -> str:
        """Model identity (file hash or server digest): part of every cache key."""
        ...

    def complete(self, prompt: str, **params: Any) -> Completion: ...


# what `stream()` yields: text deltas, then one Completion for the whole reply
StreamItem = str | Completion


LLMS: Registry[LLM] = Registry("llm", ["fixgraph.llm.backends"], shared=["cache", "generation", "max_concurrency"])


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


@LLMS.register("fake")
class FakeLLM:
    """Deterministic scripted backend for tests: every request is recorded.

    Replies come from `script` (consumed in order) when given, else from `responses` (the reply of the
    first key, in sorted order, contained in the prompt), else `default`. A reply may be a string or a
    JSON-able object (sent as JSON text). Tokens are counted as whitespace words.
    """

    kind = "fake"

    def __init__(
        self,
        name: str = "fake",
        default: Any = "",
        responses: dict[str, Any] | None = None,
        script: Sequence[Any] = (),
        model: str = "fake-model",
        supports_schema: bool = False,
        delay_s: float = 0.0,
        token_delay_s: float = 0.0,
    ) -> None:
        self.name = name
        self.delay_s = delay_s  # simulated generation time (resume tests kill a run mid-way)
        self.token_delay_s = token_delay_s  # simulated time per streamed token (serving tests)
        self.streamed_tokens = 0  # deltas actually produced by `stream` (cancellation tests count them)
        self.default = default
        self.responses = dict(responses or {})
        self.script = list(script)
        self.model = model
        self.supports_schema = supports_schema
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()  # the client may call from several threads

    def identity(self) -> str:
        return f"fake:{self.model}"

    def _reply(self, prompt: str, params: dict[str, Any]) -> str:
        with self._lock:
            self.requests.append({"prompt": prompt, **params})
            if self.script:
                reply: Any = self.script.pop(0)
            else:
                reply = next((r for key, r in sorted(self.responses.items()) if key in prompt), self.default)
        return _text_of(reply)

    def complete(self, prompt: str, **params: Any) -> Completion:
        text = self._reply(prompt, params)
        if self.delay_s:
            time.sleep(self.delay_s)
        return Completion(text, len(prompt.split()), len(text.split()), self.delay_s, model=self.identity())

    def stream(self, prompt: str, **params: Any) -> Iterator[StreamItem]:
        """The reply in whitespace-delimited pieces (each keeps its leading space), `token_delay_s` apart."""
        text = self._reply(prompt, params)
        started = time.perf_counter()
        if self.delay_s:
            time.sleep(self.delay_s)
        for piece in re.findall(r"\s*\S+", text) or ([text] if text else []):
            if self.token_delay_s:
                time.sleep(self.token_delay_s)
            with self._lock:
                self.streamed_tokens += 1
            yield piece
        yield Completion(
            text, len(prompt.split()), len(text.split()), time.perf_counter() - started, model=self.identity()
        )


def chat_messages(prompt: str, system: str | None) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": system}] if system else []
    return [*messages, {"role": "user", "content": prompt}]


def chat_fields(prompt: str, params: dict[str, Any]) -> dict[str, Any]:
    """The request fields every OpenAI-style chat API shares (None where a parameter is not set)."""
    return {
        "messages": chat_messages(prompt, params.get("system")),
        "temperature": params.get("temperature"),
        "max_tokens": params.get("max_tokens"),
        "seed": params.get("seed"),
        "top_p": params.get("top_p"),
        "stop": params.get("stop"),
    }


def drop_none(params: dict[str, Any], keys: Sequence[str] = ()) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None and k not in keys}


def build_llm(cfg: Any) -> Any:
    """The configured backend wrapped in an `LLMClient` (cache, concurrency limit, usage per stage)."""
    from fixgraph.config import to_dict
    from fixgraph.llm import backends  # noqa: F401  (registers the backends)
    from fixgraph.llm.client import LLMClient

    fields = to_dict(cfg)
    client_opts = {key: fields.pop(key) for key in ("cache", "max_concurrency", "generation") if key in fields}
    kind = fields.pop("kind", None)
    if kind is None:
        from fixgraph.config import ConfigError

        raise ConfigError(f"llm config {fields.get('name', '?')!r} has no `kind`")
    backend = LLMS.get(str(kind))(**fields)
    return LLMClient(backend, **client_opts)
