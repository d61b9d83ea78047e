"""The graph schema of a corpus (`ontology` Hydra group, one option per corpus).

It says which node and relation types exist, which endpoint types each relation allows, how far a node
type may merge (within its article or across the corpus) and which surface forms are aliases. Both
extractors, grounding validation, entity resolution and typed path search read the same object.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field

from fixgraph.registry import Registry

ANY = "any"  # alias table key for aliases valid for every node type


class NodeType(BaseModel):
    model_config = {"extra": "forbid"}  # a typo in the ontology file must not pass silently

    scope: Literal["document", "global"] = "global"
    cluster: bool = False
    description: str = ""


class RelationType(BaseModel):
    model_config = {"populate_by_name": True, "extra": "forbid"}

    sources: list[str] = Field(alias="from")
    targets: list[str] = Field(alias="to")


def alias_key(text: str) -> str:
    """Case-, space- and hyphen-insensitive form used to look up aliases."""
    return re.sub(r"[\s\-_]+", " ", text.casefold()).strip()


class Ontology(BaseModel):
    model_config = {"extra": "forbid"}

    name: str
    node_types: dict[str, NodeType]
    relation_types: dict[str, RelationType]
    aliases: dict[str, dict[str, list[str]]] = Field(default_factory=dict)

    def model_post_init(self, __context: Any) -> None:
        for rel, spec in self.relation_types.items():
            unknown = sorted(set(spec.sources + spec.targets) - set(self.node_types))
            if unknown:
                raise ValueError(f"ontology {self.name}: relation {rel!r} names unknown node types {unknown}")
        for node_type in self.aliases:
            if node_type != ANY and node_type not in self.node_types:
                raise ValueError(f"ontology {self.name}: aliases for unknown node type {node_type!r}")
        self._alias_table: dict[tuple[str, str], str] = {}
        for node_type, table in self.aliases.items():
            for canonical, forms in table.items():
                for form in [canonical, *forms]:
                    self._alias_table[(node_type, alias_key(form))] = canonical

    def has_node_type(self, node_type: str) -> bool:
        return node_type in self.node_types

    def allows(self, source_type: str, relation: str, target_type: str) -> bool:
        spec = self.relation_types.get(relation)
        return spec is not None and source_type in spec.sources and target_type in spec.targets

    def scope_of(self, node_type: str) -> str:
        return self.node_types[node_type].scope

    def canonical(self, node_type: str, name: str) -> str | None:
        """The canonical name `name` is an alias of (type-specific first, then `any`), else None."""
        key = alias_key(name)
        return self._alias_table.get((node_type, key)) or self._alias_table.get((ANY, key))

    def alias_forms(self) -> dict[str, list[tuple[str, str]]]:
        """alias key -> [(node type or `any`, canonical name)]: what entity linking matches in questions."""
        out: dict[str, list[tuple[str, str]]] = {}
        for (node_type, key), canonical in sorted(self._alias_table.items()):
            out.setdefault(key, []).append((node_type, canonical))
        return out

    def relations_from(self, source_type: str) -> list[str]:
        return sorted(r for r, spec in self.relation_types.items() if source_type in spec.sources)


ONTOLOGIES: Registry[Ontology] = Registry("ontology")


@ONTOLOGIES.register("schema")
def schema_ontology(**fields: Any) -> Ontology:
    return Ontology.model_validate(fields)


def build_ontology(cfg: Any) -> Ontology:
    from fixgraph.config import build

    return build(ONTOLOGIES, cfg)
