"""Secrets out of records: config values under secret-looking keys are replaced before a config is
logged (MLflow params and config.yaml artifacts) or shown (the API's /config).

A key is secret when its last word is api_key, apikey, secret, password, passwd, token, access_token
or authorization (so `llm.api_key` is, `answer.max_tokens` is not). Empty values stay empty: an unset
key is worth seeing. `restore` puts the live values back into a recorded config, so a run recorded
with a redacted key can be served again with the key of the current environment or command line.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SECRET_KEY = re.compile(r"(?:^|_)(?:api_?key|secret|password|passwd|token|access_token|authorization)$", re.I)
REDACTED = "<redacted>"


def is_secret(key: str) -> bool:
    return bool(SECRET_KEY.search(key))


def redact(value: Any) -> Any:
    """A copy of a plain config tree (dicts, lists, scalars) with secret values replaced."""
    if isinstance(value, Mapping):
        return {k: (REDACTED if is_secret(str(k)) and v not in (None, "") else redact(v)) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    return value


def redact_flat(params: Mapping[str, str]) -> dict[str, str]:
    """Dotted MLflow params: `llm.api_key` -> <redacted>."""
    return {k: REDACTED if is_secret(k.rsplit(".", 1)[-1]) and v not in ("", "None") else v for k, v in params.items()}


def restore(recorded: Any, live: Any) -> Any:
    """`recorded` with every REDACTED leaf replaced by the value at the same place in `live` ("" if none)."""
    if isinstance(recorded, Mapping):
        other = live if isinstance(live, Mapping) else {}
        return {k: restore(v, other.get(k)) for k, v in recorded.items()}
    if isinstance(recorded, list):
        others = live if isinstance(live, list) else []
        return [restore(v, others[i] if i < len(others) else None) for i, v in enumerate(recorded)]
    if recorded == REDACTED:
        return live if live is not None else ""
    return recorded
