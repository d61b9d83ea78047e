"""Secrets out of records: config values under secret-looking keys are replaced before a config is
logged (MLflow params and config.yaml artifacts) or shown (the API's /config).

A key is secret when its last word is api_key, apikey, secret, password, passwd, token, access_token
or authorization (so `llm.api_key` is, `answer.max_tokens` is not). Empty values stay empty: an unset
key is worth seeing. Serving a recorded run takes its system from the record and the model settings
(keys included) from the live config, so nothing needs a redacted value back.
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
