"""Documents as JSON lines, chunks as parquet (chunk id, document id, offsets, text, ...)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from fixgraph.corpus.models import Chunk, Document
from fixgraph.io import atomic_path, write_jsonl

CHUNK_COLUMNS = ["id", "doc_id", "start", "end", "text", "title", "heading_path", "section", "n_tokens", "content_hash"]


def write_documents(path: Path, docs: Sequence[Document]) -> None:
    write_jsonl(path, (d.model_dump(mode="json") for d in docs))


def read_documents(path: Path) -> list[Document]:
    with open(path, encoding="utf-8") as fh:
        return [Document.model_validate(json.loads(line)) for line in fh if line.strip()]


def write_chunks(path: Path, chunks: Sequence[Chunk]) -> None:
    frame = pd.DataFrame([c.model_dump() for c in chunks], columns=CHUNK_COLUMNS)
    with atomic_path(path) as tmp:
        frame.to_parquet(tmp, index=False)


def read_chunks(path: Path) -> list[Chunk]:
    frame = pd.read_parquet(path)
    rows = frame.to_dict(orient="records")
    return [Chunk.model_validate({**row, "heading_path": list(row["heading_path"])}) for row in rows]
