"""An append-only, resumable JSONL journal: one fsynced JSON line per finished unit of work.

A killed run leaves complete lines plus at most one torn last line. `load` cuts the torn line off
(that unit is done again), and a key that appears twice is kept once (the first line wins), so no
entry is duplicated or lost. Subclasses say how a line becomes (key, value) and which decoding
errors mark a line as torn; any other error is a real fault and propagates.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import IO, Any, Generic, TypeVar

V = TypeVar("V")


class JsonlJournal(Generic[V]):
    # A line failing with one of these ends the good part of the journal (treated as a torn write).
    torn_errors: tuple[type[Exception], ...] = (json.JSONDecodeError,)

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None

    def decode(self, raw: bytes) -> tuple[str, V]:
        """The key and value of one complete journal line."""
        raise NotImplementedError

    def load(self) -> dict[str, V]:
        """Every entry already journaled, by key; truncates a torn last line."""
        done: dict[str, V] = {}
        if not self.path.exists():
            return done
        good_end = 0
        with open(self.path, "rb") as fh:
            for raw in fh:
                if not raw.endswith(b"\n"):
                    break  # torn write of a killed run
                try:
                    key, value = self.decode(raw)
                except self.torn_errors:
                    break
                done.setdefault(key, value)
                good_end += len(raw)
        if good_end < self.path.stat().st_size:
            with open(self.path, "r+b") as fh:
                fh.truncate(good_end)
        return done

    def write(self, entry: dict[str, Any]) -> None:
        """Append one entry and fsync it before returning."""
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115  (kept open across appends)
        self._fh.write(json.dumps(entry, ensure_ascii=False) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
