"""The LLM client interface and the registry behind the `llm` Hydra group."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from fixgraph.registry import Registry


@dataclass(frozen=True)
class Completion:
    text: str
    input_tokens: int
    output_tokens: int
    seconds: float


class LLM(Protocol):
    name: str

    def complete(self, prompt: str, **params: Any) -> Completion: ...


LLMS: Registry[LLM] = Registry("llm")


@LLMS.register("fake")
@dataclass
class FakeLLM:
    """Deterministic scripted backend for tests: answers from `responses` (prompt substring -> reply).

    Every request is recorded, so tests can assert what the pipeline asked.
    """

    name: str = "fake"
    default: str = ""
    responses: dict[str, str] = field(default_factory=dict)
    requests: list[dict[str, Any]] = field(default_factory=list)

    def complete(self, prompt: str, **params: Any) -> Completion:
        self.requests.append({"prompt": prompt, **params})
        reply = next((r for key, r in sorted(self.responses.items()) if key in prompt), self.default)
        return Completion(reply, len(prompt.split()), len(reply.split()), 0.0)


def build_llm(cfg: Any) -> LLM:
    from fixgraph.config import build

    return build(LLMS, cfg)
