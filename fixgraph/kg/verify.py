"""Edge verification: an LLM checks each relation against its source text, and code checks the LLM.

The model answers `{"supported": bool, "quote": "..."}` for "does this text state <s> <rel> <o>?". A
relation survives only if the model says supported AND its quote is really in the chunk (rapidfuzz
alignment >= `quote_min`) AND both endpoint names occur in that quote or the chunk's context
(partial_ratio >= `entity_min`): a model that agrees without evidence does not count. The record's
span becomes the verified quote. Counts before and after, and rejections by reason, go to the report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fixgraph.corpus.models import Chunk
from fixgraph.kg.extract import GraphRecord
from fixgraph.kg.grounding import Rejection, align, name_score
from fixgraph.kg.prompts import load_prompt
from fixgraph.llm.structured import StructuredOutputError

VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "supported": {"type": "boolean"},
        "quote": {"type": "string", "maxLength": 400},
    },
    "required": ["supported", "quote"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class VerificationConfig:
    enabled: bool = False
    extractors: tuple[str, ...] = ("llm",)  # records of these extractors are verified
    prompt: str = "verify_edge_v1"
    quote_min: float = 90.0
    entity_min: float = 85.0
    max_tokens: int = 120

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any] | None) -> VerificationConfig:
        fields = dict(cfg or {})
        if "extractors" in fields:
            fields["extractors"] = tuple(fields["extractors"])
        return cls(**fields)


@dataclass
class VerificationResult:
    kept: list[GraphRecord] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    checked: int = 0

    def counts(self) -> dict[str, Any]:
        return {
            "relations_checked": self.checked,
            "relations_verified": self.checked - len(self.rejected),
            "rejected_by_reason": dict(sorted(Counter(r.reason for r in self.rejected).items())),
        }


def relation_phrase(record: GraphRecord) -> str:
    return f"{record.subject} ({record.subject_type}) --{record.relation}--> {record.object} ({record.object_type})"


class EdgeVerifier:
    def __init__(self, llm: Any, config: VerificationConfig) -> None:
        self.llm = llm
        self.config = config
        self.template, self.prompt_version = load_prompt(config.prompt)

    def _verify_one(self, record: GraphRecord, chunk: Chunk) -> tuple[GraphRecord | None, str, str]:
        prompt = self.template.substitute(text=chunk.text, claim=relation_phrase(record))
        try:
            verdict = self.llm.complete_json(
                prompt, VERDICT_SCHEMA, stage="verify", temperature=0.0, max_tokens=self.config.max_tokens
            ).value
        except StructuredOutputError as exc:
            return None, "verifier_invalid_answer", str(exc)
        if not verdict["supported"]:
            return None, "verifier_unsupported", ""
        quote = str(verdict["quote"]).strip()
        score, start, end = align(quote, chunk.text)
        if score < self.config.quote_min:
            return None, "verifier_quote_not_in_text", f"score {score:.0f}"
        context = chunk.title + " " + " ".join(chunk.heading_path) + " " + chunk.text[start:end]
        for name in (record.subject, record.object):
            if name_score(name, context) < self.config.entity_min:
                return None, "verifier_quote_misses_endpoint", name
        prov = record.provenance.model_copy(update={"start": chunk.start + start, "end": chunk.start + end})
        return record.model_copy(update={"provenance": prov}), "", ""

    def verify(self, records: Sequence[GraphRecord], chunks: Mapping[str, Chunk]) -> VerificationResult:
        result = VerificationResult()
        todo = [r for r in records if r.is_relation and r.provenance.extractor in self.config.extractors]
        todo_ids = {id(r) for r in todo}
        result.kept.extend(r for r in records if id(r) not in todo_ids)
        outcomes = self.llm.map(lambda r: (r, self._verify_one(r, chunks[r.provenance.chunk_id])), todo)
        for record, (kept, reason, detail) in outcomes:
            result.checked += 1
            if kept is None:
                result.rejected.append(Rejection(reason, record, detail))
            else:
                result.kept.append(kept)
        return result
