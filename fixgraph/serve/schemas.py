"""Request and response bodies of the API (they are also its OpenAPI schema at /docs).

Size limits that depend on configuration (question length, log size, k) are checked by the app
against `serve.*`, so one config changes them everywhere; the bounds here are the hard outer ones.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is a 422 naming it, not silently ignored


class SearchRequest(_Request):
    query: str = Field(min_length=1, description="the question or search text")
    k: int | None = Field(default=None, ge=1, description="hits to return (default serve.k, at most serve.max_k)")
    system: str | None = Field(default=None, description="a configured system (default: the served one)")


class AskRequest(_Request):
    question: str = Field(min_length=1)
    k: int | None = Field(default=None, ge=1, description="retrieved chunks listed in `meta`")
    system: str | None = None
    verify: bool | None = Field(default=None, description="run the claim verifier (default serve.verify)")


class DiagnoseRequest(_Request):
    log: str = Field(min_length=1, description="an error log: journal lines, dmesg, a program's stderr...")
    system: str | None = None
    explain: bool = Field(default=False, description="also ask the model for a cited explanation")
    verify: bool | None = None


class CompareRequest(_Request):
    question: str | None = Field(default=None, description="free text (or give `qid`)")
    qid: str | None = Field(default=None, description="a question of the served split: its gold is placed")
    systems: list[str] = Field(min_length=1, max_length=4)
    k: int | None = Field(default=None, ge=1)


class EvidenceRequest(_Request):
    chunk_ids: list[str] = Field(min_length=1, max_length=50)


class Hit(BaseModel):
    rank: int
    chunk_id: str
    doc_id: str
    title: str
    section: str = Field(description="heading path inside the document")
    start: int = Field(description="character offset of the chunk in its document's text")
    end: int
    score: float
    text: str | None = None


class SearchResponse(BaseModel):
    system: str
    query: str
    k: int
    hits: list[Hit]
    timings: dict[str, float] = Field(description="per-stage milliseconds of System.search, and search_ms")


class Citation(BaseModel):
    chunk_id: str
    doc_id: str
    title: str
    section: str
    start: int = Field(description="start of the cited span in the document's text")
    end: int
    chunk_start: int = Field(description="start of the cited span in the chunk's text")
    chunk_end: int
    quote: str
    span_source: str = Field(description="verifier (its quote, found in the chunk) | alignment")
    alignment: float
    verdict: str | None = None


class Sentence(BaseModel):
    text: str
    citations: list[Citation]
    supported: bool | None = Field(description="verifier: at least one citation supports it (None: not verified)")


class AskResponse(BaseModel):
    system: str
    answer: str
    sentences: list[Sentence]
    abstained: bool
    abstain_reason: str
    context_ids: list[str]
    stripped_citations: int
    reply_format: str
    prompt_version: str
    verification: dict[str, Any]
    usage: dict[str, Any] = Field(description="tokens per stage (answer, verify) and in total")
    latency: dict[str, float] = Field(description="retrieve_ms, first_token_ms, generate_ms, verify_ms, total_ms")
