"""The run settings of an `answer` option, apart from the answerer's own parameters.

An `answer` option holds both: the answerer's parameters (prompt, budget, abstention policy: checked
against its constructor by `config.build`) and what the `answers` run does with it (systems, sample,
verifier, guard...). The run keys are the fields of `RunSettings`; every other key goes to the
answerer, so a misspelt key is an error naming it on one side or the other, never silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from fixgraph.config import ConfigError, to_dict
from fixgraph.evaluation.judge_guard import GuardSettings


@dataclass(frozen=True)
class GradedSet:
    """Answers graded by people (`fixgraph label`) that every run's judge is measured on."""

    answers: str | None = None  # answers file (JSON lines: qid, system, answer, abstained)
    labels: str | None = None  # label file: {"item", "correctness"} per line
    questions: str | None = None  # the question file the answers answer (reference answers, key facts)
    max_items: int | None = None  # judge at most this many labelled answers (cost of an LLM judge)


@dataclass(frozen=True)
class RunSettings:
    systems: list[str] | None = None  # retriever systems to answer with (None: every configured system)
    closed_book: bool = False  # add the closed-book baseline
    closed_book_prompt: str = "answer_closed_book_v1"
    baseline: str | None = None
    family_metrics: list[str] = field(default_factory=lambda: ["correctness"])
    max_questions: int | None = None
    sample: str = "stratified"  # stratified | first (how max_questions are chosen)
    sample_seed: int = 0
    labels: str | None = None  # human labels of this run's own answers (agreement + PPI mean)
    verify: dict[str, Any] = field(default_factory=dict)
    ragas: dict[str, Any] = field(default_factory=dict)
    guard: GuardSettings = field(default_factory=GuardSettings)
    graded: GradedSet = field(default_factory=GradedSet)

    @classmethod
    def from_config(cls, cfg: Any) -> RunSettings:
        values = {k: v for k, v in to_dict(cfg).items() if k in RUN_KEYS}
        guard = _strict(GuardSettings, values.pop("guard", None) or {}, "answer.guard")
        graded = _strict(GradedSet, values.pop("graded", None) or {}, "answer.graded")
        return cls(**values, guard=guard, graded=graded)


def _strict(kind: type, values: Mapping[str, Any], where: str) -> Any:
    known = {f.name for f in fields(kind)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(sorted(known))}")
    return kind(**values)


RUN_KEYS = frozenset(f.name for f in fields(RunSettings))


def answerer_fields(cfg: Any) -> dict[str, Any]:
    """The option without its run settings: what the answerer's constructor receives."""
    return {k: v for k, v in to_dict(cfg).items() if k not in RUN_KEYS}
