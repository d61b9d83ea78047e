"""The `llm` judge: correctness on a 0 / 0.5 / 1 rubric and key-fact coverage, by a language model.

It reads the question, the reference answer and the numbered key facts of the question file and grades
one answer, in one call (prompt `judge_v2`, a versioned file), with a model of its own (`judge.llm`):
a model grading its own answers is the least informative judge there is (issue 18: the 1.5B model gave
its own answers 0.5 almost always and every key fact), so the answers run refuses a judge whose model
is the answering one unless `allow_self` is set. Its reliability is measured, not assumed: every
answers run judges the graded set too and records the kappa (`answer.graded`). A malformed grade
(after one retry) is "not judged" (None), never 0.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from fixgraph.evaluation.judge import JUDGES, Judgement
from fixgraph.evaluation.prompts import load_prompt
from fixgraph.evaluation.questions import Question
from fixgraph.llm.structured import StructuredOutputError
from fixgraph.llm.usage import StageCost

JUDGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "correctness": {"enum": [0, 0.5, 1]},
        "covered": {"type": "array", "maxItems": 20, "items": {"type": "integer"}},
        "rationale": {"type": "string", "maxLength": 400},
    },
    "required": ["correctness", "covered"],
}


@JUDGES.register("llm")
class LLMJudge:
    deterministic = False

    def __init__(
        self, name: str, llm: Mapping[str, Any], prompt: str, max_tokens: int, allow_self: bool = False
    ) -> None:
        if not llm:
            raise ValueError(f"judge {name}: needs its own model, judge.llm (e.g. llm@judge.llm=qwen_coder_05b)")
        self.name = name
        self.max_tokens = max_tokens
        self.llm_cfg = dict(llm)
        self.allow_self = allow_self  # let the answering model grade its own answers (not by default)
        self.template, self.prompt_version = load_prompt(prompt)
        self._client: Any = None

    @property
    def client(self) -> Any:
        if self._client is None:
            from fixgraph.llm.base import build_llm

            self._client = build_llm(self.llm_cfg)
        return self._client

    def identity(self) -> str:
        return f"llm:{self.client.identity()}:{self.prompt_version}"

    def prompt(self, question: Question, answer: str) -> str:
        facts = "\n".join(f"{i}. {fact}" for i, fact in enumerate(question.key_facts, start=1)) or "(none)"
        reference = question.answer or "(no reference answer)"
        return self.template.substitute(question=question.question, reference=reference, facts=facts, answer=answer)

    def judge_with_cost(self, question: Question, answer: str) -> tuple[Judgement, StageCost]:
        cost = StageCost()
        started = time.perf_counter()
        try:
            result = self.client.complete_json(
                self.prompt(question, answer), JUDGE_SCHEMA, stage="judge", temperature=0.0, max_tokens=self.max_tokens
            )
        except StructuredOutputError as exc:
            for completion in exc.completions:
                cost.add(completion, 0.0)
            cost.seconds = time.perf_counter() - started
            return Judgement(None, None, f"invalid judge answer: {exc}"), cost
        for completion in result.completions:
            cost.add(completion, 0.0)
        cost.seconds = time.perf_counter() - started
        value = result.value
        n_facts = len(question.key_facts)
        covered = {int(i) for i in value["covered"] if 1 <= int(i) <= n_facts}  # out-of-range numbers dropped
        recall = len(covered) / n_facts if n_facts else None
        rationale = str(value.get("rationale", ""))
        return Judgement(float(value["correctness"]), recall, rationale, tuple(sorted(covered)), n_facts), cost

    def judge(self, question: Question, answer: str) -> Judgement:
        return self.judge_with_cost(question, answer)[0]
