"""ASGI middleware of the service: API key, request size limit, one log line per request.

Pure ASGI (not BaseHTTPMiddleware), so streamed responses pass through untouched and a client that
disconnects still cancels its stream. The log line holds method, path, status and duration: never a
body, a header value, a prompt or a key.
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

log = logging.getLogger("fixgraph.serve.requests")
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]
PUBLIC = ("/health", "/docs", "/openapi.json", "/static/", "/favicon.ico")


async def _reply(send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            + (headers or []),
        }
    )
    await send({"type": "http.response.body", "body": body})


class _TooLargeError(Exception):
    pass


class Guard:
    """API key (when one is configured) and a cap on request body size."""

    def __init__(self, app: App, api_key: str, max_body_bytes: int, key_env: str) -> None:
        self.app, self.api_key, self.limit, self.key_env = app, api_key, max_body_bytes, key_env

    def _authorised(self, scope: Scope) -> bool:
        path = str(scope.get("path", ""))
        if not self.api_key or path == "/" or path.startswith(PUBLIC):
            return True  # the dashboard shell and docs hold no data; the dashboard asks for the key
        headers = dict(scope.get("headers") or [])
        given = headers.get(b"x-api-key", b"").decode("latin-1")
        bearer = headers.get(b"authorization", b"").decode("latin-1")
        if not given and bearer.lower().startswith("bearer "):
            given = bearer[7:].strip()
        return bool(given) and hmac.compare_digest(given.encode(), self.api_key.encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self._authorised(scope):
            await _reply(
                send,
                401,
                f"missing or wrong API key: send it as `X-API-Key` or `Authorization: Bearer` (${self.key_env})",
                [(b"www-authenticate", b"Bearer")],
            )
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await _reply(
                send, 413, f"request body is {int(declared)} bytes; the limit is {self.limit} (serve.max_body_bytes)"
            )
            return
        received = 0
        started = False

        async def limited() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise _TooLargeError
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited, tracked)
        except _TooLargeError:
            if not started:
                await _reply(send, 413, f"request body exceeds {self.limit} bytes (serve.max_body_bytes)")


class RequestLog:
    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0
        logged = False

        def write_line() -> None:
            nonlocal logged
            logged = True
            ms = 1000 * (time.perf_counter() - started)
            log.info("%s %s %s %.1fms", scope.get("method"), scope.get("path"), status or "-", ms)

        async def tracked(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                write_line()  # before the last byte leaves: a client that has its answer finds the line
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        finally:
            if not logged:  # the app failed or the client went away before the body ended
                write_line()
