"""The `judge` registry: scores an answer against a question's reference answer and key facts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from fixgraph.evaluation.questions import Question
from fixgraph.registry import Registry


@dataclass(frozen=True)
class Judgement:
    correctness: float | None  # 0 / 0.5 / 1, None when not judged
    key_fact_recall: float | None
    rationale: str = ""
    covered: tuple[int, ...] | None = None  # numbers (1-based) of the key facts the answer states
    n_facts: int = 0


class Judge(Protocol):
    name: str

    def identity(self) -> str:
        """What grades: the judge's rules or model (recorded with every run)."""
        ...

    def judge(self, question: Question, answer: str) -> Judgement: ...


JUDGES: Registry[Judge] = Registry("judge", ["fixgraph.evaluation.llm_judge", "fixgraph.evaluation.rule_judge"])


@JUDGES.register("none")
class NoJudge:
    """Judges nothing: retrieval-only runs report no answer metrics."""

    def __init__(self, name: str = "none") -> None:
        self.name = name

    def identity(self) -> str:
        return "none"

    def judge(self, question: Question, answer: str) -> Judgement:
        return Judgement(None, None, "no judge configured")


def build_judge(cfg: Any) -> Judge:
    from fixgraph.config import build
    from fixgraph.evaluation import llm_judge, rule_judge  # noqa: F401  (register the `llm` and `keyfacts` judges)

    return build(JUDGES, cfg)
