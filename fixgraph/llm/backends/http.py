"""Shared HTTP plumbing of the server backends: timeouts and a clear error when a server is down."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from fixgraph.llm.base import LLMError, LLMUnavailableError


def unreachable(backend: str, url: str, exc: Exception) -> LLMUnavailableError:
    return LLMUnavailableError(
        f"llm backend {backend}: cannot reach the server at {url} ({exc}); is it running? "
        "Set llm.base_url (or llm.host) to where it listens."
    )


def request_json(
    method: str, url: str, backend: str, timeout_s: float, payload: dict[str, Any] | None = None, **kw: Any
) -> Any:
    """Send one request and return its JSON body; connection failures name the server and what to do."""
    import httpx

    try:
        response = httpx.request(method, url, json=payload, timeout=timeout_s, **kw)
    except httpx.ConnectError as exc:
        raise unreachable(backend, url, exc) from exc
    except httpx.TimeoutException as exc:
        raise LLMError(f"llm backend {backend}: no answer from {url} within {timeout_s:g}s (llm.timeout_s)") from exc
    if response.status_code >= 400:
        raise LLMError(f"llm backend {backend}: {url} answered HTTP {response.status_code}: {response.text[:300]}")
    try:
        return response.json()
    except ValueError as exc:
        raise LLMError(f"llm backend {backend}: {url} did not answer JSON: {response.text[:200]!r}") from exc


def stream_lines(
    url: str, backend: str, timeout_s: float, payload: dict[str, Any], headers: dict[str, str] | None = None
) -> Iterator[str]:
    """POST `payload` and yield the non-empty lines of a streamed reply (SSE or NDJSON) as they arrive.

    `timeout_s` bounds the wait for each piece, not the whole reply, so a server that stalls mid-answer
    raises LLMError instead of hanging the caller. Closing the generator closes the connection, which
    stops generation on servers that watch for it (llama.cpp, vLLM, ollama)."""
    import httpx

    try:
        with httpx.stream("POST", url, json=payload, timeout=timeout_s, headers=headers) as response:
            if response.status_code >= 400:
                body = response.read().decode("utf-8", "replace")
                raise LLMError(f"llm backend {backend}: {url} answered HTTP {response.status_code}: {body[:300]}")
            for line in response.iter_lines():
                if line.strip():
                    yield line
    except httpx.ConnectError as exc:
        raise unreachable(backend, url, exc) from exc
    except httpx.TimeoutException as exc:
        raise LLMError(f"llm backend {backend}: {url} sent nothing for {timeout_s:g}s (llm.timeout_s)") from exc
    except httpx.HTTPError as exc:  # the server dropped the connection mid-reply
        raise LLMError(f"llm backend {backend}: the stream from {url} broke off ({type(exc).__name__})") from exc


def stream_chunk(text: str, url: str, backend: str, what: str) -> dict[str, Any]:
    """One streamed JSON object (`what` names it in the error: "an event", "a line"); a bad one, or one
    that reports an error, is an LLMError."""
    try:
        chunk: dict[str, Any] = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LLMError(f"llm backend {backend}: {url} streamed {what} that is not JSON: {text[:120]!r}") from exc
    if chunk.get("error"):
        raise LLMError(f"llm backend {backend}: {url} reported: {str(chunk['error'])[:300]}")
    return chunk
