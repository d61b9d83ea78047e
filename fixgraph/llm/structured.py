"""Structured output: answers parsed as JSON and validated against a JSON schema.

Backends with constrained decoding (llama.cpp grammars, ollama `format`, vLLM / llama.cpp server
`response_format`) get the schema with the request. Every answer is still validated here, because a
server may ignore the schema or stop at max_tokens mid-object; an invalid answer is retried once with
the validation error appended to the prompt, then reported as `StructuredOutputError`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from fixgraph.llm.base import Completion, LLMError

FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)

RETRY_TEMPLATE = (
    "{prompt}\n\nYour previous answer was not valid: {error}\n"
    "Answer again with one JSON object that matches the schema, and nothing else."
)


class StructuredOutputError(LLMError):
    """The model's answer did not parse or validate, even after one retry with the error."""

    def __init__(self, message: str, completions: list[Completion]) -> None:
        super().__init__(message)
        self.completions = completions


@dataclass
class StructuredResult:
    value: Any
    completions: list[Completion] = field(default_factory=list)

    @property
    def retried(self) -> bool:
        return len(self.completions) > 1


def parse_json(text: str) -> Any:
    """The JSON value in `text`; tolerates a Markdown code fence around it (small models add one)."""
    match = FENCE.match(text)
    return json.loads(match.group(1) if match else text)


def validation_error(value: Any, schema: dict[str, Any]) -> str | None:
    """None when `value` matches `schema`, else a short description of the first problem."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"at {where}: {error.message}"


def check(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """(value, None) for a valid answer, (None, error) otherwise."""
    try:
        value = parse_json(text)
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at character {exc.pos})"
    error = validation_error(value, schema)
    return (None, error) if error else (value, None)


def retry_prompt(prompt: str, error: str) -> str:
    return RETRY_TEMPLATE.format(prompt=prompt, error=error)
