"""placeholder"""

from typing import Any


def command(cfg: Any, action: str, out: Any, limit: int, kinds: list[str]) -> int:
    raise NotImplementedError
