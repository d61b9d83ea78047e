"""Server-Sent Events from a blocking event generator, without ever hanging a client.

Retrieval and generation block (llama.cpp decodes on the calling thread), so each stream runs its
generator on a thread of its own and hands events to the event loop through a queue. Three ways out,
each leaving nothing behind:
- the generator finishes (`done`) or raises: the exception becomes an `error` event with a code, and
  its reason is logged (the message, never the prompt);
- nothing arrives for `idle_timeout_s` while the model, too, has produced nothing for that long: an
  `error` event (`timeout`), and the generator is cancelled. A stream waiting for a model that is busy
  with other requests (one llama.cpp context serves them in turn) is not stalled: it gets a `progress`
  event (`waiting`) every `HEARTBEAT_S` instead;
- the client disconnects: Starlette cancels the response task, the `finally` below sets `cancel`, the
  thread stops at the next token and closes the generator, which closes the model's stream (an HTTP
  connection to a server, or llama.cpp's decoding loop).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator
from typing import Any

from fixgraph.llm.base import LLMError, LLMUnavailableError

log = logging.getLogger(__name__)
Event = tuple[str, dict[str, Any]]
Produce = Callable[[threading.Event], Generator[Event, None, None]]
_END: Event = ("__end__", {})
HEARTBEAT_S = 10.0
_ids = itertools.count(1)


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False, default=str)}\n\n".encode()


def error_event(exc: BaseException) -> Event:
    """An exception as the `error` event a client sees: a stable code and a readable message."""
    from fixgraph.serve.answering import GarbageReplyError

    if isinstance(exc, LLMUnavailableError):
        code = "llm_unavailable"
    elif isinstance(exc, GarbageReplyError):
        code = "llm_garbage"
    elif isinstance(exc, LLMError):
        code = "llm_error"
    elif isinstance(exc, KeyError):
        code = "not_found"
    else:
        code = "internal"
    message = str(exc.args[0]) if isinstance(exc, KeyError) and exc.args else str(exc)
    return "error", {"code": code, "message": message or type(exc).__name__}


class StreamGuard:
    """Counts streams and bounds how many run at once (`max_streams`)."""

    def __init__(self, limit: int, count: Callable[[str, int], None]) -> None:
        self.limit = limit
        self.active = 0
        self.count = count
        self._lock = threading.Lock()

    def acquire(self) -> bool:
        with self._lock:
            if self.active >= self.limit:
                return False
            self.active += 1
        self.count("streams_active", 1)
        return True

    def release(self, outcome: str) -> None:
        with self._lock:
            self.active -= 1
        self.count("streams_active", -1)
        self.count(f"streams_{outcome}", 1)


async def run_events(
    produce: Produce, idle_timeout_s: float, label: str, alive: Callable[[], float] | None = None
) -> AsyncIterator[Event]:
    """The generator's events, as they come, on the event loop; see the module docstring. `alive()`
    is when the model last showed activity (time.monotonic())."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[Event] = asyncio.Queue()
    cancel = threading.Event()
    stream_id = next(_ids)

    def put(item: Event) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is gone (server shutting down)
            cancel.set()

    def work() -> None:
        events = produce(cancel)
        try:
            for item in events:
                if cancel.is_set():
                    break
                put(item)
        except Exception as exc:
            event = error_event(exc)
            log.warning("%s #%d failed (%s): %s", label, stream_id, event[1]["code"], event[1]["message"])
            put(event)
        finally:
            events.close()  # GeneratorExit inside: the model's stream is closed, its slot freed
            put(_END)

    threading.Thread(target=work, name=f"fixgraph-{label}-{stream_id}", daemon=True).start()
    poll = min(idle_timeout_s, HEARTBEAT_S)
    last = time.monotonic()
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), timeout=poll)
            except TimeoutError:
                now = time.monotonic()
                quiet, model_quiet = now - last, now - (alive() if alive is not None else last)
                if quiet >= idle_timeout_s and model_quiet >= idle_timeout_s:
                    log.warning("%s #%d: nothing for %.0fs, cancelled", label, stream_id, quiet)
                    message = f"no progress for {idle_timeout_s:g}s (serve.stream_idle_timeout_s); generation cancelled"
                    yield "error", {"code": "timeout", "message": message}
                    return
                if quiet >= HEARTBEAT_S:
                    yield "progress", {"stage": "waiting", "waited_s": round(quiet, 1)}
                continue
            last = time.monotonic()
            if item is _END:
                return
            yield item
    finally:
        cancel.set()


async def sse_stream(
    produce: Produce, idle_timeout_s: float, label: str, guard: StreamGuard, alive: Callable[[], float] | None = None
) -> AsyncIterator[bytes]:
    """`run_events` as SSE bytes; records how the stream ended (completed, failed, cancelled)."""
    outcome = "cancelled"  # unless we see it end: a client that leaves is a cancellation
    try:
        async for event, data in run_events(produce, idle_timeout_s, label, alive):
            if event == "done":
                outcome = "completed"
            elif event == "error":
                outcome = "failed"
            yield sse(event, data)
    finally:
        guard.release(outcome)
