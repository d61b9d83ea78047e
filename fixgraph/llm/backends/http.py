"""Shared HTTP plumbing of the server backends: timeouts and a clear error when a server is down."""

from __future__ import annotations

from typing import Any

from fixgraph.llm.base import LLMError, LLMUnavailableError


def request_json(
    method: str, url: str, backend: str, timeout_s: float, payload: dict[str, Any] | None = None, **kw: Any
) -> Any:
    """Send one request and return its JSON body; connection failures name the server and what to do."""
    import httpx

    try:
        response = httpx.request(method, url, json=payload, timeout=timeout_s, **kw)
    except httpx.ConnectError as exc:
        raise LLMUnavailableError(
            f"llm backend {backend}: cannot reach the server at {url} ({exc}); is it running? "
            "Set llm.base_url (or llm.host) to where it listens."
        ) from exc
    except httpx.TimeoutException as exc:
        raise LLMError(f"llm backend {backend}: no answer from {url} within {timeout_s:g}s (llm.timeout_s)") from exc
    if response.status_code >= 400:
        raise LLMError(f"llm backend {backend}: {url} answered HTTP {response.status_code}: {response.text[:300]}")
    try:
        return response.json()
    except ValueError as exc:
        raise LLMError(f"llm backend {backend}: {url} did not answer JSON: {response.text[:200]!r}") from exc
