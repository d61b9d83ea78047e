"""The `extractor` registry: chunks in, graph records with provenance out.

Every extractor (structural, llm, none) emits the same `GraphRecord`: an entity (no relation) or a
relation between two typed entities, with the evidence text it rests on and where it was stated
(chunk, character span in the document, extractor, model, prompt version, time). Extraction works
chunk by chunk so a long LLM run can be journaled and resumed (`fixgraph.kg.journal`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

from pydantic import BaseModel, Field

from fixgraph.corpus.models import Chunk, Document
from fixgraph.io import stable_hash
from fixgraph.kg.ontology import Ontology
from fixgraph.registry import Registry


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class Provenance(BaseModel):
    chunk_id: str
    doc_id: str
    start: int  # character span of the evidence in the document text, half-open
    end: int
    extractor: str
    model: str = ""
    prompt_version: str = ""
    extracted_at: str = Field(default_factory=utc_now)


class GraphRecord(BaseModel):
    """An entity (`relation` empty) or a relation `subject -relation-> object`, with its evidence.

    `basis` says what the evidence is: `text` (a quote of the chunk, checked by fuzzy matching) or
    `markup` (a structural fact of the page, e.g. a `<link type="seealso">` with no visible text).
    """

    subject: str
    subject_type: str
    relation: str = ""
    object: str = ""
    object_type: str = ""
    # optional stable identities (e.g. "doc:<page id>" for Articles): two pages with the same title are
    # two nodes, and resolution keys such entities by ref instead of by name
    subject_ref: str = ""
    object_ref: str = ""
    evidence: str = ""
    basis: Literal["text", "markup"] = "text"
    provenance: Provenance

    @property
    def is_relation(self) -> bool:
        return bool(self.relation)

    @property
    def record_id(self) -> str:
        """Content id: the same fact from the same place gets the same id on every run (no time in it)."""
        prov = self.provenance
        return stable_hash(
            [
                self.subject,
                self.subject_type,
                self.relation,
                self.object,
                self.object_type,
                self.subject_ref,
                self.object_ref,
                self.evidence,
                prov.chunk_id,
                prov.start,
                prov.end,
                prov.extractor,
                prov.model,
                prov.prompt_version,
            ]
        )[:20]


class ExtractionContext(BaseModel):
    """What an extractor may read besides the chunk: every document (titles, links, spans)."""

    model_config = {"arbitrary_types_allowed": True}

    documents: Mapping[str, Document]
    ontology: Ontology
    llm: Any = None  # an LLMClient, for extractors that need one


class Extractor(Protocol):
    name: str

    def identity(self) -> str:
        """Changes whenever the records for the same chunk could change (config, model, prompt)."""
        ...

    def prepare(self, context: ExtractionContext) -> None: ...

    def extract(self, chunk: Chunk) -> list[GraphRecord]: ...

    def usage(self) -> dict[str, dict[str, Any]]:
        """LLM tokens and time per stage spent so far (empty for extractors that use no LLM)."""
        ...


EXTRACTORS: Registry[Extractor] = Registry(
    "extractor",
    ["fixgraph.kg.llm_extractor", "fixgraph.kg.structural"],
    shared=["max_chunks", "sample_seed", "uses_llm"],
)


@EXTRACTORS.register("none")
class NoExtractor:
    """Builds no graph: retrieval-only runs."""

    def __init__(self, name: str = "none") -> None:
        self.name = name

    def identity(self) -> str:
        return "none"

    def prepare(self, context: ExtractionContext) -> None:
        return None

    def extract(self, chunk: Chunk) -> list[GraphRecord]:
        return []

    def usage(self) -> dict[str, dict[str, Any]]:
        return {}


def extract_all(extractor: Extractor, chunks: Sequence[Chunk]) -> list[GraphRecord]:
    return [record for chunk in chunks for record in extractor.extract(chunk)]


def build_extractor(cfg: Any, **extra: Any) -> Extractor:
    from fixgraph.config import build
    from fixgraph.kg import llm_extractor, structural  # noqa: F401  (registers the extractors)

    return build(EXTRACTORS, cfg, **extra)
