"""The `llm` extractor: schema-constrained, few-shot extraction with a versioned prompt file.

The JSON schema is built from the ontology (entity types and relation names as enums, item caps that
bound the output tokens), sent to backends that constrain decoding, and validated for every backend.
Entity evidence is the name itself and relation evidence the quoted sentence; both are aligned to the
chunk by grounding validation, which also sets the exact character span.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fixgraph.corpus.models import Chunk
from fixgraph.io import stable_hash
from fixgraph.kg.extract import EXTRACTORS, ExtractionContext, GraphRecord, Provenance, utc_now
from fixgraph.kg.ontology import Ontology
from fixgraph.kg.prompts import load_prompt
from fixgraph.llm.base import Completion
from fixgraph.llm.structured import StructuredOutputError


def extraction_schema(
    node_types: Sequence[str], relations: Sequence[str], max_entities: int, max_relations: int
) -> dict[str, Any]:
    entity = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 120}, "type": {"enum": list(node_types)}},
        "required": ["name", "type"],
        "additionalProperties": False,
    }
    relation = {
        "type": "object",
        "properties": {
            "head": {"type": "string", "maxLength": 120},
            "rel": {"enum": list(relations)},
            "tail": {"type": "string", "maxLength": 120},
            "quote": {"type": "string", "maxLength": 300},
        },
        "required": ["head", "rel", "tail", "quote"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "entities": {"type": "array", "items": entity, "maxItems": max_entities},
            "relations": {"type": "array", "items": relation, "maxItems": max_relations},
        },
        "required": ["entities", "relations"],
        "additionalProperties": False,
    }


@EXTRACTORS.register("llm")
class LLMExtractor:
    def __init__(
        self,
        name: str = "llm",
        prompt: str = "extract_v1",
        node_types: Sequence[str] = (),
        relations: Sequence[str] = (),
        max_entities: int = 10,
        max_relations: int = 6,
        max_tokens: int = 400,
        temperature: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.name = name
        self.prompt_name = prompt
        self.template, self.prompt_version = load_prompt(prompt)
        self.node_types = list(node_types)
        self.relations = list(relations)
        self.max_entities, self.max_relations = max_entities, max_relations
        self.params = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed}
        self.llm: Any = None
        self.ontology: Ontology | None = None
        self.schema: dict[str, Any] = {}
        self.failures: list[dict[str, str]] = []  # chunks whose answer never validated
        self.chunk_usage: dict[str, dict[str, int]] = {}  # chunk id -> tokens of its calls (retries included)

    def prepare(self, context: ExtractionContext) -> None:
        if context.llm is None:
            raise ValueError(f"extractor {self.name}: needs an LLM (select one with llm=<option>)")
        self.llm = context.llm
        self.ontology = context.ontology
        types = self.node_types or sorted(context.ontology.node_types)
        relations = self.relations or sorted(context.ontology.relation_types)
        unknown = sorted(set(types) - set(context.ontology.node_types)) + sorted(
            set(relations) - set(context.ontology.relation_types)
        )
        if unknown:
            raise ValueError(
                f"extractor {self.name}: types or relations not in ontology {context.ontology.name}: {unknown}"
            )
        self.node_types, self.relations = types, relations
        self.schema = extraction_schema(types, relations, self.max_entities, self.max_relations)

    def identity(self) -> str:
        model = self.llm.identity() if self.llm is not None else ""
        return stable_hash(
            {
                "kind": "llm",
                "prompt": self.prompt_version,
                "types": self.node_types,
                "relations": self.relations,
                "caps": [self.max_entities, self.max_relations],
                "params": self.params,
                "model": model,
            }
        )

    def usage(self) -> dict[str, dict[str, Any]]:
        return self.llm.usage.totals() if self.llm is not None else {}

    def _relation_lines(self) -> str:
        assert self.ontology is not None
        lines = []
        for rel in self.relations:
            spec = self.ontology.relation_types[rel]
            sources = "|".join(t for t in spec.sources if t in self.node_types)
            targets = "|".join(t for t in spec.targets if t in self.node_types)
            if sources and targets:
                lines.append(f"{rel}: {sources} -> {targets}")
        return "\n".join(lines)

    def render(self, chunk: Chunk) -> str:
        return self.template.substitute(
            types=", ".join(self.node_types),
            relations=self._relation_lines(),
            max_entities=self.max_entities,
            max_relations=self.max_relations,
            title=chunk.heading(),
            text=chunk.text,
        )

    def _count(self, chunk: Chunk, completions: Sequence[Completion]) -> None:
        self.chunk_usage[chunk.id] = {
            "calls": len(completions),
            "input_tokens": sum(c.input_tokens for c in completions),
            "output_tokens": sum(c.output_tokens for c in completions),
        }

    def extract(self, chunk: Chunk) -> list[GraphRecord]:
        if self.llm is None:
            raise RuntimeError(f"extractor {self.name}: prepare() was not called")
        try:
            result = self.llm.complete_json(self.render(chunk), self.schema, stage="extract", **self.params)
        except StructuredOutputError as exc:
            self._count(chunk, exc.completions)
            self.failures.append({"chunk_id": chunk.id, "error": str(exc)})
            return []
        self._count(chunk, result.completions)
        model = self.llm.identity()
        extracted_at = utc_now()

        def prov() -> Provenance:
            # the chunk's span until grounding aligns the evidence inside it
            return Provenance(
                chunk_id=chunk.id,
                doc_id=chunk.doc_id,
                start=chunk.start,
                end=chunk.end,
                extractor=self.name,
                model=model,
                prompt_version=self.prompt_version,
                extracted_at=extracted_at,
            )

        value = result.value
        type_of: dict[str, str] = {}
        records: list[GraphRecord] = []
        for entity in value["entities"]:
            name = entity["name"].strip()
            type_of.setdefault(name.casefold(), entity["type"])
            records.append(GraphRecord(subject=name, subject_type=entity["type"], evidence=name, provenance=prov()))
        for rel in value["relations"]:
            head, tail = rel["head"].strip(), rel["tail"].strip()
            records.append(
                GraphRecord(
                    subject=head,
                    subject_type=type_of.get(head.casefold(), ""),
                    relation=rel["rel"],
                    object=tail,
                    object_type=type_of.get(tail.casefold(), ""),
                    evidence=rel["quote"].strip(),
                    provenance=prov(),
                )
            )
        return records
