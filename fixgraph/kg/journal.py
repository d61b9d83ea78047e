"""A resumable extraction journal: one JSON line per finished chunk, fsynced before the next.

A killed run leaves complete lines plus at most one torn last line. On resume the torn line is cut
off (that chunk is extracted again; its LLM answer usually comes from the cache), chunks already in
the journal are skipped, and a chunk id that appears twice is kept once: no record is duplicated or
lost. The journal's file name carries a key of everything that determines the records (extractor
identity, chunk set), so a changed config never resumes from stale work.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from fixgraph.corpus.models import Chunk
from fixgraph.journal import JsonlJournal
from fixgraph.kg.extract import GraphRecord


@dataclass
class ChunkResult:
    records: list[GraphRecord]
    usage: dict[str, int] = field(default_factory=dict)  # LLM tokens spent on this chunk


class ExtractionJournal(JsonlJournal[ChunkResult]):
    def decode(self, raw: bytes) -> tuple[str, ChunkResult]:
        entry = json.loads(raw)
        records = [GraphRecord.model_validate(r) for r in entry["records"]]
        return entry["chunk_id"], ChunkResult(records, entry.get("usage", {}))

    def append(self, chunk_id: str, result: ChunkResult) -> None:
        self.write({"chunk_id": chunk_id, "records": [r.model_dump() for r in result.records], "usage": result.usage})


def run_journaled(
    extract: Callable[[Chunk], ChunkResult],
    chunks: Sequence[Chunk],
    journal: ExtractionJournal,
    mapper: Callable[[Callable[[Chunk], Any], Iterable[Chunk]], Iterable[Any]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, ChunkResult], int]:
    """Results per chunk id for every chunk (journaled ones reused), and how many were resumed."""
    done = journal.load()
    resumed = sum(1 for c in chunks if c.id in done)
    todo = [c for c in chunks if c.id not in done]
    run = mapper or (lambda fn, items: map(fn, items))
    try:
        for n, (chunk, result) in enumerate(run(lambda c: (c, extract(c)), todo), start=1):
            journal.append(chunk.id, result)
            done[chunk.id] = result
            if progress is not None:
                progress(resumed + n, len(chunks))
    finally:
        journal.close()
    return {c.id: done[c.id] for c in chunks}, resumed
