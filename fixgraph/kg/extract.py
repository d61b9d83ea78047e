"""The `extractor` registry: chunks in, graph records with provenance out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from pydantic import BaseModel

from fixgraph.corpus.models import Chunk
from fixgraph.registry import Registry


class Provenance(BaseModel):
    chunk_id: str
    start: int  # character span in the chunk's document
    end: int
    extractor: str
    model: str = ""
    prompt_version: str = ""


class GraphRecord(BaseModel):
    """An entity (`relation` empty) or a relation between two entities, with where it was stated."""

    subject: str
    subject_type: str
    relation: str = ""
    object: str = ""
    object_type: str = ""
    provenance: Provenance


class Extractor(Protocol):
    name: str

    def extract(self, chunks: Sequence[Chunk]) -> list[GraphRecord]: ...


EXTRACTORS: Registry[Extractor] = Registry("extractor")


@EXTRACTORS.register("none")
class NoExtractor:
    """Builds no graph: retrieval-only runs."""

    def __init__(self, name: str = "none", **_: Any) -> None:
        self.name = name

    def extract(self, chunks: Sequence[Chunk]) -> list[GraphRecord]:
        return []


def build_extractor(cfg: Any) -> Extractor:
    from fixgraph.config import build

    return build(EXTRACTORS, cfg)
