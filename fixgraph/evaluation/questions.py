"""Question files (one JSON object per line, the format of shared/bench) as typed records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

QuestionType = Literal["direct", "procedure", "bridge", "multi", "unanswerable"]


class QuestionFileError(ValueError):
    """A malformed question file; the message names the file, the line and the field."""


class GoldQuote(BaseModel):
    model_config = ConfigDict(extra="forbid")
    page: str = Field(min_length=1)
    quote: str = Field(min_length=1)


class Bridge(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    from_page: str = Field(alias="from", min_length=1)
    to: str = Field(min_length=1)
    link_text: str = ""


class Question(BaseModel):
    model_config = ConfigDict(extra="allow")
    qid: str = Field(min_length=1)
    question: str = Field(min_length=1)
    qtype: str = "direct"
    answerable: bool = True
    gold: list[GoldQuote] = Field(default_factory=list)
    answer: str = ""
    key_facts: list[str] = Field(default_factory=list)
    bridge: Bridge | None = None

    @model_validator(mode="after")
    def _gold_matches_answerable(self) -> Question:
        if self.answerable and not self.gold:
            raise ValueError("answerable question without gold quotes")
        return self

    @property
    def answer_pages(self) -> set[str]:
        """Pages that hold the answer: the bridge target for bridge questions, else the gold pages."""
        if self.bridge is not None:
            return {self.bridge.to}
        return {g.page for g in self.gold}


def load_questions(path: Path) -> list[Question]:
    """Parse a question file; any bad line raises naming file, line and field, before any work starts."""
    if not path.exists():
        raise QuestionFileError(f"{path}: question file not found")
    questions: list[Question] = []
    seen: dict[str, int] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise QuestionFileError(f"{path}:{lineno}: not valid JSON: {exc.msg} (column {exc.colno})") from None
            if not isinstance(record, dict):
                raise QuestionFileError(f"{path}:{lineno}: expected a JSON object, got {type(record).__name__}")
            try:
                question = Question.model_validate(record)
            except ValidationError as exc:
                err = exc.errors()[0]
                field = ".".join(str(part) for part in err["loc"]) or "(record)"
                raise QuestionFileError(f"{path}:{lineno}: field {field!r}: {err['msg']}") from None
            if question.qid in seen:
                raise QuestionFileError(
                    f"{path}:{lineno}: field 'qid': duplicate id {question.qid!r} (first on line {seen[question.qid]})"
                )
            seen[question.qid] = lineno
            questions.append(question)
    if not questions:
        raise QuestionFileError(f"{path}: no questions")
    return questions
