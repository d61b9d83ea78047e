"""`LLMClient`: the one object the pipeline calls, whatever the backend.

It adds what every backend needs and none should reimplement: the SQLite answer cache, a concurrency
limit (a semaphore around backend calls; `map` runs work on that many threads), default request
parameters from config, structured output with validation and one retry, and token/time accounting
per stage.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from fixgraph.llm.base import LLM, Completion, LLMError, StreamItem
from fixgraph.llm.cache import LLMCache, cache_key
from fixgraph.llm.structured import StructuredOutputError, StructuredResult, check, retry_prompt
from fixgraph.llm.usage import UsageMeter, active_meters

T = TypeVar("T")
R = TypeVar("R")


class LLMClient:
    def __init__(
        self,
        backend: LLM,
        cache: Mapping[str, Any] | None = None,
        max_concurrency: int = 1,
        generation: Mapping[str, Any] | None = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"llm {backend.name}: max_concurrency must be >= 1, got {max_concurrency}")
        self.backend = backend
        self.name = backend.name
        self.kind = backend.kind
        self.max_concurrency = max_concurrency
        self.generation = dict(generation or {})  # default request parameters
        cache = cache or {}
        enabled = bool(cache.get("enabled", True)) and bool(cache.get("path"))
        self.cache_path = Path(str(cache["path"])) if enabled else None
        self._cache: LLMCache | None = None
        self.usage = UsageMeter()
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._identity: str | None = None
        self._identity_lock = threading.Lock()
        # when the backend last started a call or produced anything (monotonic seconds): a server
        # streaming to many clients tells a model that is busy from one that has stalled by it
        self.last_activity = time.monotonic()

    @property
    def cache(self) -> LLMCache | None:
        """Opened on first use, so building a client (e.g. to validate config) creates no file."""
        if self._cache is None and self.cache_path is not None:
            self._cache = LLMCache(self.cache_path)
        return self._cache

    @property
    def supports_schema(self) -> bool:
        return bool(self.backend.supports_schema)

    def identity(self) -> str:
        # computed once: for a GGUF file it is a sha256 over a GB, for a server a network round trip
        with self._identity_lock:
            if self._identity is None:
                self._identity = self.backend.identity()
            return self._identity

    def complete(self, prompt: str, stage: str = "default", **params: Any) -> Completion:
        request, cache, key, hit = self._lookup(prompt, stage, params)
        if hit is not None:
            return hit
        with self._slots:
            self.last_activity = time.monotonic()
            completion = self.backend.complete(prompt, **request)
            self.last_activity = time.monotonic()
        self._record(stage, cache, key, request, prompt, completion)
        return completion

    def _lookup(
        self, prompt: str, stage: str, params: dict[str, Any]
    ) -> tuple[dict[str, Any], LLMCache | None, str, Completion | None]:
        """The request (config defaults, then `params`), the cache, the request's cache key ("" without a
        cache) and its cached reply if there is one (counted for `stage`)."""
        request = {**self.generation, **params}
        cache = self.cache
        if cache is None:
            return request, None, "", None
        key = cache_key(self.kind, self.identity(), request, prompt)
        hit = cache.get(key)
        if hit is not None:
            self._count(stage, hit)
        return request, cache, key, hit

    def _record(
        self,
        stage: str,
        cache: LLMCache | None,
        key: str,
        request: dict[str, Any],
        prompt: str,
        completion: Completion,
    ) -> None:
        """Cache a fresh reply and count it for `stage`."""
        if cache is not None:
            cache.put(key, self.kind, self.identity(), request, prompt, completion)
        self._count(stage, completion)

    def _count(self, stage: str, completion: Completion) -> None:
        """In this client's totals and in every `metering()` block the call is made in."""
        self.usage.record(stage, completion)
        for meter in active_meters():
            meter.record(stage, completion)

    def stream(self, prompt: str, stage: str = "default", **params: Any) -> Iterator[StreamItem]:
        """Text deltas as the backend produces them, then the whole reply's Completion (cached and
        counted like `complete`). A cached reply comes back as one delta; a backend that cannot stream
        answers in one piece. Closing the iterator early stops the backend and frees its slot; a reply
        cut short is neither cached nor counted as complete (its tokens so far are not known)."""
        request, cache, key, hit = self._lookup(prompt, stage, params)
        if hit is not None:
            if hit.text:
                yield hit.text
            yield hit
            return
        backend_stream = getattr(self.backend, "stream", None)
        completion: Completion | None = None
        with self._slots:
            self.last_activity = time.monotonic()
            if backend_stream is None:
                completion = self.backend.complete(prompt, **request)
                if completion.text:
                    yield completion.text
            else:
                source = backend_stream(prompt, **request)
                try:
                    for item in source:
                        self.last_activity = time.monotonic()
                        if isinstance(item, Completion):
                            completion = item
                        else:
                            yield item
                finally:
                    source.close()  # early close (client gone): stop the backend before freeing the slot
        if completion is None:
            raise LLMError(f"llm {self.name}: the stream ended without a final completion")
        self._record(stage, cache, key, request, prompt, completion)
        yield completion

    def complete_json(
        self, prompt: str, schema: dict[str, Any], stage: str = "default", **params: Any
    ) -> StructuredResult:
        """A JSON value valid under `schema`, or StructuredOutputError after one retry with the error."""
        constrained = {"schema": schema} if self.supports_schema else {}
        completions: list[Completion] = []
        attempt_prompt = prompt
        error = ""
        for _ in range(2):
            completion = self.complete(attempt_prompt, stage=stage, **constrained, **params)
            completions.append(completion)
            value, problem = check(completion.text, schema)
            if problem is None:
                return StructuredResult(value, completions)
            error = problem
            attempt_prompt = retry_prompt(prompt, problem)
        raise StructuredOutputError(f"llm {self.name}: invalid structured answer after a retry: {error}", completions)

    def map(self, fn: Callable[[T], R], items: Iterable[T]) -> Iterable[R]:
        """Apply `fn` to items on `max_concurrency` threads, yielding results in input order."""
        if self.max_concurrency == 1:
            yield from (fn(item) for item in items)
            return
        # each item runs in a copy of the caller's context, so `metering()` blocks count calls made on threads
        caller = contextvars.copy_context()
        with ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            yield from pool.map(lambda item: caller.copy().run(fn, item), items)

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None
