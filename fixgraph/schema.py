"""Strict configs: every key of a composed config is checked before any work, and an unknown one is an
error naming it and listing the valid keys (an appended `+systems.hybrid.rrf_kk=5` fails, it is never
run and recorded as if it applied).

- Group options (`corpus`, `retriever`, `systems.<name>`, ...) are checked against the schema of their
  implementation: the signature of the factory registered under their `kind` (fixgraph/registry.py),
  recursively into the options they hold (a hybrid's channels, a reranked system's first stage...).
- Plain sections (`paths`, `evaluation`, `graph`, ...) are checked against the dataclasses below with
  OmegaConf's structured configs. Values live in conf/ only: these schemas hold no defaults.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from fixgraph.config import ConfigError, accepted_keys, to_dict
from fixgraph.registry import Registry

# Hydra group -> the module holding its registry and the registry's name
GROUPS: dict[str, tuple[str, str]] = {
    "corpus": ("fixgraph.corpus.sources", "CORPORA"),
    "chunker": ("fixgraph.corpus.chunking", "CHUNKERS"),
    "embedder": ("fixgraph.embedders.encoders", "EMBEDDERS"),
    "retriever": ("fixgraph.retrieval.base", "RETRIEVERS"),
    "reranker": ("fixgraph.retrieval.rerank", "RERANKERS"),
    "extractor": ("fixgraph.kg.extract", "EXTRACTORS"),
    "ontology": ("fixgraph.kg.ontology", "ONTOLOGIES"),
    "llm": ("fixgraph.llm.base", "LLMS"),
    "judge": ("fixgraph.evaluation.judge", "JUDGES"),
    "answer": ("fixgraph.answer.base", "ANSWERERS"),
    "keyfacts": ("fixgraph.evaluation.keyfacts", "KEYFACT_MATCHERS"),
    "trainer": ("fixgraph.training.kinds", "TRAINERS"),
    "split": ("fixgraph.evaluation.splits", "SPLITS"),
    "experiment": ("fixgraph.experiment.runners", "EXPERIMENTS"),
    "sweep": ("fixgraph.experiment.sweep_spec", "SWEEPS"),
    "serve": ("fixgraph.serve.settings", "SERVERS"),
}
# Fields of an option that hold options of another group (one, or a mapping name -> option).
NESTED: dict[str, tuple[str, bool]] = {
    "channels": ("retriever", True),
    "first_stage": ("retriever", False),
    "dense": ("retriever", False),
    "channel": ("retriever", False),
    "reranker": ("reranker", False),
    "scorers": ("reranker", True),
    "embedder": ("embedder", False),
    "llm": ("llm", False),
    "ontology": ("ontology", False),
}


@dataclass
class Paths:
    data: str = MISSING
    artifacts: str = MISSING
    mlruns: str = MISSING
    experiments: str = MISSING


@dataclass
class Tracking:
    enabled: bool = MISSING
    uri: str = MISSING
    experiment: str = MISSING


@dataclass
class Bootstrap:
    resamples: int = MISSING
    confidence: float = MISSING
    seed: int = MISSING


@dataclass
class Evaluation:
    ks: list[int] = MISSING
    main_k: int = MISSING
    ndcg_k: int = MISSING
    depth: int = MISSING
    min_gold_coverage: float = MISSING
    allow_unmapped: bool = MISSING
    bootstrap: Bootstrap = field(default_factory=Bootstrap)


@dataclass
class Splitting:
    pool: str = MISSING
    file: str = MISSING
    test_fraction: float = MISSING
    salt: str = MISSING


@dataclass
class Comparison:
    permutations: int = MISSING
    engine: str = MISSING
    family_metrics: list[str] = MISSING
    plots: bool = MISSING


@dataclass
class Grounding:
    entity_min: float = MISSING
    evidence_min: float = MISSING
    max_name_chars: int = MISSING


@dataclass
class Resolution:
    embedding: bool = MISSING
    similarity: float = MISSING
    max_candidates: int = MISSING


@dataclass
class Verification:
    enabled: bool = MISSING
    extractors: list[str] = MISSING
    prompt: str = MISSING
    quote_min: float = MISSING
    entity_min: float = MISSING
    max_tokens: int = MISSING


@dataclass
class Communities:
    enabled: bool = MISSING
    resolution: float = MISSING
    seed: int = MISSING
    exclude_relations: list[str] = MISSING
    summaries: bool = MISSING
    summarise_top: int = MISSING
    members_in_prompt: int = MISSING
    prompt: str = MISSING


@dataclass
class Graph:
    work_dir: str = MISSING
    node_vectors: bool = MISSING
    grounding: Grounding = field(default_factory=Grounding)
    resolution: Resolution = field(default_factory=Resolution)
    verification: Verification = field(default_factory=Verification)
    communities: Communities = field(default_factory=Communities)


@dataclass
class CorpusQA:
    output: str = MISSING
    prompt: str = MISSING
    min_words: int = MISSING
    min_support: float = MISSING
    max_tokens: int = MISSING
    max_chunks: Any = MISSING  # int or null
    exclude_questions: list[str] = MISSING
    max_benchmark_similarity: float = MISSING
    llm: Any = MISSING  # an llm option, checked by validate()


@dataclass
class LinkPred:
    output: str = MISSING
    trainers: list[str] = MISSING
    relations: Any = MISSING  # list of relation names or null
    threshold: float = MISSING
    top_k: int = MISSING
    max_edges: int = MISSING


@dataclass
class Training:
    corpus_qa: CorpusQA = field(default_factory=CorpusQA)
    linkpred: LinkPred = field(default_factory=LinkPred)
    trainers: Any = MISSING  # name -> trainer option, checked by validate()


@dataclass
class Expansion:
    output: str = MISSING
    work_dir: str = MISSING
    prompt: str = MISSING
    questions: int = MISSING
    max_tokens: int = MISSING
    max_chunks: int | None = None
    llm: Any = MISSING  # an llm option, checked against its implementation in `validate`


SECTIONS: dict[str, type] = {
    "paths": Paths,
    "tracking": Tracking,
    "evaluation": Evaluation,
    "splitting": Splitting,
    "comparison": Comparison,
    "graph": Graph,
    "training": Training,
    "expansion": Expansion,
}
# free-form: `systems` (checked as retriever options), `seed`, and `bench` (a benchmark's own knobs,
# appended with +bench.x=... and read only by that benchmark)
OTHER = ("systems", "seed", "bench")


def registry(group: str) -> Registry[Any]:
    module, name = GROUPS[group]
    found: Registry[Any] = getattr(importlib.import_module(module), name)
    found.load()
    return found


def check_option(group: str, node: Any, where: str) -> None:
    """Keys of one option (and of the options it holds) against its implementation's signature."""
    fields = to_dict(node)
    kind = fields.get("kind")
    if kind is None:
        kinds = ", ".join(registry(group).names())
        raise ConfigError(f"{where}: a {group} option needs a `kind`; valid kinds: {kinds}")
    options = registry(group)
    factory = options.get(str(kind))
    keys, _, var_keyword = accepted_keys(factory)
    valid = list(dict.fromkeys(["kind", *keys, *options.shared]))
    unknown = sorted(set(fields) - set(valid))
    if unknown and not var_keyword:
        raise ConfigError(
            f"{where} ({group} {fields.get('name', kind)!r}, kind {kind}): unknown key(s) {', '.join(unknown)}; "
            f"valid keys: {', '.join(valid)}"
        )
    for key, value in fields.items():
        if key not in NESTED or not isinstance(value, Mapping):
            continue
        nested, many = NESTED[key]
        held = list(value.items()) if many else [("", value)]
        for name, option in held:
            if isinstance(option, Mapping):  # a held option without `kind` is an error too (check_option)
                check_option(nested, option, f"{where}.{key}" + (f".{name}" if name else ""))


def check_section(name: str, node: Any) -> None:
    schema = OmegaConf.structured(SECTIONS[name])
    try:
        OmegaConf.merge(schema, node if isinstance(node, DictConfig) else OmegaConf.create(node))
    except OmegaConfBaseException as exc:
        valid = ", ".join(schema.keys())
        raise ConfigError(f"{name}: {str(exc).splitlines()[0]}; valid keys of {name}: {valid}") from None


def validate(cfg: DictConfig) -> None:
    """Raise ConfigError for the first key of `cfg` that no schema knows."""
    allowed = [*GROUPS, *SECTIONS, *OTHER]
    unknown = sorted(str(k) for k in set(cfg.keys()) - set(allowed))
    if unknown:
        raise ConfigError(f"unknown top-level key(s) {', '.join(unknown)}; valid: {', '.join(allowed)}")
    for name in SECTIONS:
        if name in cfg:
            check_section(name, cfg[name])
    for group in GROUPS:
        if cfg.get(group) is not None:
            check_option(group, cfg[group], group)
    for name, system in (cfg.get("systems") or {}).items():
        check_option("retriever", system, f"systems.{name}")
    training: Any = cfg.get("training") or {}
    for name, trainer in (training.get("trainers") or {}).items():
        check_option("trainer", trainer, f"training.trainers.{name}")
    corpus_qa = training.get("corpus_qa") or {}
    if corpus_qa.get("llm") is not None:
        check_option("llm", corpus_qa["llm"], "training.corpus_qa.llm")
    if cfg.get("expansion") is not None and cfg.expansion.get("llm") is not None:
        check_option("llm", cfg.expansion.llm, "expansion.llm")
