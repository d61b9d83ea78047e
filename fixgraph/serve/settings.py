"""The `serve` config group: where the service listens, what it serves, and its limits.

One registry per Hydra group: `serve` options have `kind: uvicorn`; `build(SERVERS, cfg.serve)` checks
every key against `ServeSettings`' fields, so a misspelt limit is an error naming it, not a default.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from typing import Any

from fixgraph.config import ConfigError
from fixgraph.registry import Registry


@dataclass(frozen=True)
class ServeSettings:
    name: str
    host: str
    port: int
    system: str | None
    k: int
    verify: bool
    api_key_env: str
    max_body_bytes: int
    max_question_chars: int
    max_log_bytes: int
    max_k: int
    max_streams: int
    stream_idle_timeout_s: float
    mlflow_ui: str
    log_requests: bool

    def __post_init__(self) -> None:
        positive = ("port", "k", "max_body_bytes", "max_question_chars", "max_log_bytes", "max_k", "max_streams")
        bad = [f"{key}={getattr(self, key)}" for key in positive if int(getattr(self, key)) < 1]
        if self.stream_idle_timeout_s <= 0:
            bad.append(f"stream_idle_timeout_s={self.stream_idle_timeout_s}")
        if bad:
            raise ConfigError(f"serve {self.name!r}: must be positive: {', '.join(bad)}")
        if self.k > self.max_k:
            raise ConfigError(f"serve {self.name!r}: k={self.k} exceeds max_k={self.max_k}")

    @property
    def loopback(self) -> bool:
        return is_loopback(self.host)

    def api_key(self) -> str:
        """The key from the environment ('' when unset); read at start-up, never stored in config."""
        return os.environ.get(self.api_key_env, "") if self.api_key_env else ""


SERVERS: Registry[ServeSettings] = Registry("serve")
SERVERS.register("uvicorn")(ServeSettings)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_settings(cfg: Any) -> ServeSettings:
    from fixgraph.config import build

    return build(SERVERS, cfg)


def check_binding(settings: ServeSettings, allow_remote: bool) -> None:
    """Loopback by default; anything else needs the explicit flag and an API key in the environment."""
    if settings.loopback:
        return
    if not allow_remote:
        raise ConfigError(
            f"serve.host={settings.host} is not a loopback address: pass --allow-remote to expose the "
            f"service, and set an API key in ${settings.api_key_env}"
        )
    if not settings.api_key():
        raise ConfigError(
            f"serve.host={settings.host} with --allow-remote needs an API key: set ${settings.api_key_env} "
            "(serve.api_key_env names the variable)"
        )
