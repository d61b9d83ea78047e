"""A SQLite cache of LLM answers, keyed by everything that can change an answer.

The key is the hash of: backend kind, model identity (GGUF file hash or server digest), every request
parameter (temperature, max_tokens, seed, schema, system prompt...) and the full prompt. Rerunning a
pipeline step, or resuming a killed one, therefore costs no model time for answers already seen.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from fixgraph.io import stable_hash
from fixgraph.llm.base import Completion

SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    params TEXT NOT NULL,
    prompt TEXT NOT NULL,
    text TEXT NOT NULL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    seconds REAL NOT NULL,
    created REAL NOT NULL,
    top_logprobs TEXT
)
"""


def cache_key(backend: str, model: str, params: dict[str, Any], prompt: str) -> str:
    return stable_hash({"backend": backend, "model": model, "params": params, "prompt": prompt})


class LLMCache:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        # one connection shared by the client's worker threads, serialised by a lock; WAL lets a
        # second process (a resumed run, a benchmark) read while this one writes
        self._db = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(SCHEMA)
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(completions)")}
        if "top_logprobs" not in columns:  # caches written before first-token log-probabilities existed
            self._db.execute("ALTER TABLE completions ADD COLUMN top_logprobs TEXT")
        self._db.commit()
        self._lock = threading.Lock()

    def get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._db.execute(
                "SELECT text, input_tokens, output_tokens, seconds, model, top_logprobs FROM completions WHERE key = ?",
                (key,),
            ).fetchone()
        if row is None:
            return None
        text, input_tokens, output_tokens, seconds, model, top = row
        return Completion(
            text,
            int(input_tokens),
            int(output_tokens),
            float(seconds),
            cached=True,
            model=model,
            top_logprobs=json.loads(top) if top else None,
        )

    def put(
        self, key: str, backend: str, model: str, params: dict[str, Any], prompt: str, completion: Completion
    ) -> None:
        row = (
            key,
            backend,
            model,
            json.dumps(params, sort_keys=True, default=str),
            prompt,
            completion.text,
            completion.input_tokens,
            completion.output_tokens,
            completion.seconds,
            time.time(),
            json.dumps(completion.top_logprobs, sort_keys=True) if completion.top_logprobs is not None else None,
        )
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM completions").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
