"""One registry per Hydra group: option name -> implementation behind the group's interface."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownOptionError(KeyError):
    """Raised for a config option that no implementation is registered under."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it readable
        return str(self.args[0])


class Registry(Generic[T]):
    """Maps the `kind` field of a config node to the factory that builds it.

    `implementations` are the modules whose import registers the group's options; they are imported on
    first use, so every caller (builders, the config schema check) sees the same full registry.
    `shared` keys may appear in any option of the group and are read by the layer around the
    implementation (the LLM client's `cache`, the ingest stage's `dedup`...); an implementation that
    does not take one is built without it."""

    def __init__(self, group: str, implementations: Sequence[str] = (), shared: Sequence[str] = ()) -> None:
        self.group = group
        self.shared = tuple(shared)
        self._factories: dict[str, Callable[..., T]] = {}
        self._implementations = tuple(implementations)
        self._loaded = not implementations

    def load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._implementations:
                importlib.import_module(module)

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def decorator(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories:
                raise ValueError(f"{self.group}: {name!r} registered twice")
            self._factories[name] = factory
            return factory

        return decorator

    def get(self, name: str) -> Callable[..., T]:
        self.load()
        try:
            return self._factories[name]
        except KeyError:
            valid = ", ".join(sorted(self._factories))
            raise UnknownOptionError(f"unknown {self.group} kind {name!r}; valid kinds: {valid}") from None

    def names(self) -> list[str]:
        self.load()
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._factories
