"""Collectors a `with` block puts in place for all the code it calls: a context variable holds the tuple of
active ones, so blocks nest and each collector sees everything done inside its block (LLM usage meters,
embedding counters), without the code in between passing it along."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

T = TypeVar("T")


@contextmanager
def collecting(active: ContextVar[tuple[T, ...]], collector: T) -> Iterator[T]:
    """`collector` is in `active` for the block (after the collectors of the blocks around it)."""
    token = active.set((*active.get(), collector))
    try:
        yield collector
    finally:
        active.reset(token)
