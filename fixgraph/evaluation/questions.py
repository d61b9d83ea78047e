"""Question files (one JSON object per line, the format of shared/bench) as typed records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

QuestionType = Literal["direct", "procedure", "bridge", "multi", "unanswerable"]


class QuestionFileError(ValueError):
    """A malformed question file; the message names the file, the line and the field."""


class GoldQuote(BaseModel):
    """An exact span of a document's text, named by document id (`page`) or, for scraped corpora, by URL."""

    model_config = ConfigDict(extra="forbid")
    page: str = ""
    url: str = ""
    quote: str = Field(min_length=1)

    @model_validator(mode="after")
    def _one_target(self) -> GoldQuote:
        if not self.page and not self.url:
            raise ValueError("needs 'page' (a document id) or 'url' (a scraped page's address)")
        if self.page and self.url:
            raise ValueError("give 'page' (a document id) or 'url' (a scraped page's address), not both")
        return self

    @property
    def target(self) -> str:
        return self.page or self.url


class Bridge(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)
    from_page: str = Field(alias="from", min_length=1)
    to: str = Field(min_length=1)
    link_text: str = ""


class Question(BaseModel):
    model_config = ConfigDict(extra="allow")
    _source: str = PrivateAttr(default="")  # "file:line" it was read from (not part of its content hash)
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
        """Pages that hold the answer: the bridge target for bridge questions, else the gold pages
        (URL gold is resolved to document ids by the gold mapping: GoldMapping.answer_pages)."""
        if self.bridge is not None:
            return {self.bridge.to}
        return {g.target for g in self.gold}

    @property
    def source(self) -> str:
        """Where the question was read: `file:line`, or its qid when built in code."""
        return self._source or self.qid


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
            line = line.rstrip("\r\n")  # else an unclosed string reads as "holds a raw line break"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise QuestionFileError(f"{path}:{lineno}: {json_problem(exc, line)}") from None
            if not isinstance(record, dict):
                raise QuestionFileError(
                    f"{path}:{lineno}: each line must be one JSON object {{...}}, this one is a {_json_type(record)}"
                )
            try:
                question = Question.model_validate(record)
            except ValidationError as exc:
                raise QuestionFileError(f"{path}:{lineno}: {field_problem(exc)}") from None
            if question.qid in seen:
                raise QuestionFileError(
                    f"{path}:{lineno}: field 'qid': duplicate id {question.qid!r} (first on line {seen[question.qid]})"
                )
            seen[question.qid] = lineno
            question._source = f"{path}:{lineno}"
            questions.append(question)
    if not questions:
        raise QuestionFileError(f"{path}: no questions")
    return questions


# json's messages, in words a question writer understands (the column is added after them)
_JSON_WORDS = {
    "Expecting ',' delimiter": "a comma is missing between two fields or list items",
    "Expecting ':' delimiter": "a colon is missing after a field name",
    "Expecting property name enclosed in double quotes": (
        "a field name must be in double quotes, and there may be no comma before a closing }"
    ),
    "Expecting value": (
        "a value is missing or not valid JSON (text needs double quotes; true, false and null are lower case; "
        "no comma before a closing ] or })"
    ),
    "Unterminated string starting at": "a text value is not closed: its closing double quote is missing",
    "Extra data": "there is more after the end of the JSON object (one question per line)",
    "Invalid control character at": "a text value holds a raw tab or line break (write \\t or \\n)",
    "Invalid \\escape": "a backslash escape is not valid JSON (write \\\\ for one backslash)",
}


def json_problem(exc: json.JSONDecodeError, line: str) -> str:
    """'not valid JSON: <plain words> at column N, near: ...<here>...'."""
    words = next((text for prefix, text in _JSON_WORDS.items() if exc.msg.startswith(prefix)), exc.msg)
    at = exc.pos
    before, after = line[max(0, at - 30) : at], line[at : at + 20]
    return f"not valid JSON: {words} (column {exc.colno}, near: {before!r} <here> {after!r})"


def _json_type(value: object) -> str:
    return {list: "list [...]", str: "text value", int: "number", float: "number", bool: "true/false"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def field_problem(exc: ValidationError) -> str:
    """The first validation error of a record as 'field 'gold.0.quote': <plain words>'."""
    errors = exc.errors()
    err = errors[0]
    field = ".".join(str(part) for part in err["loc"]) or "(record)"
    kind, value = err["type"], err.get("input")
    if kind == "missing":
        words = "is missing"
    elif kind == "string_too_short":
        words = "is empty"
    elif kind == "string_type":
        words = f"must be text in double quotes, got {_json_type(value)}"
    elif kind == "list_type":
        words = f"must be a list [...], got {_json_type(value)}"
    elif kind in ("bool_type", "bool_parsing"):
        words = f"must be true or false, got {value!r}"
    elif kind in ("model_type", "dict_type"):
        words = f"must be an object {{...}}, got {_json_type(value)}"
    elif kind == "extra_forbidden":
        words = "is not a known field here (a gold entry takes 'page' or 'url', and 'quote')"
    elif kind == "value_error":
        words = str(err["msg"]).removeprefix("Value error, ")
    else:
        words = str(err["msg"])
    more = f" (and {len(errors) - 1} more problem(s) in this record)" if len(errors) > 1 else ""
    return f"field {field!r}: {words}{more}"
