"""The `llm` judge: correctness on a 0 / 0.5 / 1 rubric and key-fact coverage, by a language model.

It reads the question, the reference answer and the numbered key facts of the question file and grades
one answer (prompt `judge_v2`, a versioned file). By default it runs on the answering model (the
top-level `llm`) but with its own prompt; set `judge.llm` to a model config to judge with another
model. Its reliability is measured, not assumed: `evaluation.agreement` compares its grades with
human labels (`fixgraph label`). A malformed grade (after one retry) is "not judged" (None), never 0.
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
    def __init__(
        self,
        name: str = "llm",
        prompt: str = "judge_v2",
        max_tokens: int = 120,
        llm: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.max_tokens = max_tokens
        self.llm_cfg = dict(llm) if llm else None
        self.template, self.prompt_version = load_prompt(prompt)
        self._client: Any = None

    @property
    def own_model(self) -> bool:
        """True when the judge has a model of its own (else it borrows the answering one)."""
        return self.llm_cfg is not None

    def attach(self, client: Any) -> None:
        """Use this client (the answering model) unless the judge config names its own model."""
        if self.llm_cfg is None:
            self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            if self.llm_cfg is None:
                raise RuntimeError(f"judge {self.name}: no model; call attach() or set judge.llm")
            from fixgraph.llm.base import build_llm

            self._client = build_llm(self.llm_cfg)
        return self._client

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
        return Judgement(float(value["correctness"]), recall, str(value.get("rationale", ""))), cost

    def judge(self, question: Question, answer: str) -> Judgement:
        return self.judge_with_cost(question, answer)[0]
