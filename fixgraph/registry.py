"""One registry per Hydra group: option name -> implementation behind the group's interface."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownOptionError(KeyError):
    """Raised for a config option that no implementation is registered under."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it readable
        return str(self.args[0])


class Registry(Generic[T]):
    """Maps the `kind` field of a config node to the factory that builds it."""

    def __init__(self, group: str) -> None:
        self.group = group
        self._factories: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def decorator(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories:
                raise ValueError(f"{self.group}: {name!r} registered twice")
            self._factories[name] = factory
            return factory

        return decorator

    def get(self, name: str) -> Callable[..., T]:
        try:
            return self._factories[name]
        except KeyError:
            valid = ", ".join(sorted(self._factories))
            raise UnknownOptionError(f"unknown {self.group} kind {name!r}; valid kinds: {valid}") from None

    def names(self) -> list[str]:
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories
