"""Grounding validation: every record must be stated by its source chunk, in the ontology's terms.

Checks, in order (the first failure is the rejection reason, counted per reason):
- `endpoint_untyped`, `unknown_node_type`, `unknown_relation`, `endpoint_not_allowed`: the ontology's schema;
- `empty_name`, `name_too_long`, `self_loop`;
- `span_outside_chunk`: the provenance span must lie inside its chunk;
- text evidence: an exact span match passes at once (structural records point at the very text);
  otherwise rapidfuzz's best partial alignment of the evidence in the chunk must score at least
  `evidence_min` (`evidence_not_in_text`), and the record's span is set to that alignment;
- entity names (and both relation endpoints) must match the chunk, with its page title and headings,
  with partial_ratio >= `entity_min`
  (`entity_not_in_text`, `endpoint_not_in_text`); a relation's endpoint that is an Article named by
  a link is exempt, since the link itself is the evidence.
Markup-based records (info links with no visible text) skip the text checks: the parser saw the link.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fixgraph.corpus.models import Chunk
from fixgraph.kg.extract import GraphRecord
from fixgraph.kg.ontology import Ontology


@dataclass(frozen=True)
class GroundingConfig:
    entity_min: float = 90.0
    evidence_min: float = 85.0
    max_name_chars: int = 200

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> GroundingConfig:
        return cls(**dict(cfg or {}))


@dataclass
class Rejection:
    reason: str
    record: GraphRecord
    detail: str = ""


@dataclass
class GroundingResult:
    accepted: list[GraphRecord] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return dict(sorted(Counter(r.reason for r in self.rejected).items()))


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


def name_score(name: str, text: str) -> float:
    from rapidfuzz import fuzz

    return float(fuzz.partial_ratio(_fold(name), _fold(text)))


def _lower_same_length(text: str) -> str:
    """Lowercase without changing the length (offsets into the result are offsets into `text`)."""
    return "".join(ch.lower() if len(ch.lower()) == 1 else ch for ch in text)


def align(evidence: str, text: str) -> tuple[float, int, int]:
    """(score, start, end) of the best case-insensitive partial alignment of `evidence` inside `text`."""
    from rapidfuzz import fuzz

    if not evidence.strip():
        return 0.0, 0, 0
    found = text.find(evidence)
    if found >= 0:
        return 100.0, found, found + len(evidence)
    evidence, text = _lower_same_length(evidence), _lower_same_length(text)
    found = text.find(evidence)
    if found >= 0:
        return 100.0, found, found + len(evidence)
    result = fuzz.partial_ratio_alignment(evidence, text)
    if result is None:
        return 0.0, 0, 0
    return float(result.score), int(result.dest_start), int(result.dest_end)


class GroundingValidator:
    def __init__(self, ontology: Ontology, config: GroundingConfig) -> None:
        self.ontology = ontology
        self.config = config

    def _schema_problem(self, r: GraphRecord) -> str | None:
        if r.is_relation and not (r.subject_type and r.object_type):
            return "endpoint_untyped"  # an LLM relation naming an entity it did not list
        if not self.ontology.has_node_type(r.subject_type):
            return "unknown_node_type"
        if r.is_relation:
            if r.relation not in self.ontology.relation_types:
                return "unknown_relation"
            if not self.ontology.has_node_type(r.object_type):
                return "unknown_node_type"
            if not self.ontology.allows(r.subject_type, r.relation, r.object_type):
                return "endpoint_not_allowed"
        names = [r.subject, r.object] if r.is_relation else [r.subject]
        if any(not n.strip() for n in names):
            return "empty_name"
        if any(len(n) > self.config.max_name_chars for n in names):
            return "name_too_long"
        if r.is_relation and r.subject_type == r.object_type:
            same = (
                (r.subject_ref == r.object_ref)
                if (r.subject_ref or r.object_ref)
                else _fold(r.subject) == _fold(r.object)
            )
            if same:
                return "self_loop"
        return None

    def check(self, record: GraphRecord, chunk: Chunk) -> tuple[GraphRecord | None, str, str]:
        """(record, "", "") when grounded, possibly with its span corrected; else (None, reason, detail)."""
        problem = self._schema_problem(record)
        if problem:
            return None, problem, ""
        prov = record.provenance
        if record.basis == "markup":
            return record, "", ""
        inside = chunk.start <= prov.start <= prov.end <= chunk.end
        if not inside and prov.extractor != "llm":
            # LLM records carry the chunk's span until aligned below; anything else is a bug upstream
            return None, "span_outside_chunk", f"{prov.start}-{prov.end} not in {chunk.start}-{chunk.end}"
        exact = inside and (chunk.text[prov.start - chunk.start : prov.end - chunk.start] == record.evidence)
        if not exact:
            score, start, end = align(record.evidence, chunk.text)
            if score < self.config.evidence_min:
                # an entity's evidence is its name: say so rather than "evidence"
                reason = "evidence_not_in_text" if record.is_relation else "entity_not_in_text"
                return None, reason, f"score {score:.0f}"
            record = record.model_copy(
                update={"provenance": prov.model_copy(update={"start": chunk.start + start, "end": chunk.start + end})}
            )
        # names may come from the chunk's context (its page title and headings): a step's Problem is the
        # page it is on
        context = chunk.index_text()
        if not record.is_relation:
            score = name_score(record.subject, context)
            if score < self.config.entity_min:
                return None, "entity_not_in_text", f"score {score:.0f}"
            return record, "", ""
        for name, node_type in ((record.subject, record.subject_type), (record.object, record.object_type)):
            if node_type == "Article" and record.relation in ("links_to", "in_guide", "see_also"):
                continue  # the target page is named by the link, not by the text around it
            score = name_score(name, context)
            if score < self.config.entity_min:
                return None, "endpoint_not_in_text", f"{name!r} score {score:.0f}"
        return record, "", ""

    def validate(self, records: Iterable[GraphRecord], chunks: Mapping[str, Chunk]) -> GroundingResult:
        result = GroundingResult()
        for record in records:
            chunk = chunks.get(record.provenance.chunk_id)
            if chunk is None:
                result.rejected.append(Rejection("unknown_chunk", record, record.provenance.chunk_id))
                continue
            kept, reason, detail = self.check(record, chunk)
            if kept is None:
                result.rejected.append(Rejection(reason, record, detail))
            else:
                result.accepted.append(kept)
        return result
