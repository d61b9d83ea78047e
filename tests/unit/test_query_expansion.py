"""Query expansion (HyDE / Query2doc): what the first stage is asked, with a scripted LLM."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from fixgraph.config import ConfigError, compose, to_dict
from fixgraph.corpus.models import Chunk
from fixgraph.retrieval.base import RETRIEVERS, Hit, build_retriever
from tests.kg_helpers import chunk

CHUNKS = [chunk("Turn on bounce keys to ignore repeated presses", doc_id="a"), chunk("Set up a printer", doc_id="b")]
FAKE_LLM = {"name": "fake", "kind": "fake", "responses": {"keyboard": "  Open Settings,\n then Accessibility.  "}}


@RETRIEVERS.register("test_recording")
class Recording:
    """A first stage that records the queries it is asked and ranks by shared words."""

    def __init__(self, name: str = "test_recording") -> None:
        self.name = name
        self.queries: list[str] = []
        self.built: list[Path] = []

    def build(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        self.built.append(workdir)

    def load(self, chunks: Sequence[Chunk], workdir: Path) -> None:
        self.chunks = list(chunks)

    def search(self, query: str, k: int) -> list[Hit]:
        self.queries.append(query)
        words = set(query.lower().split())
        scored = [Hit(c.id, float(len(words & set(c.text.lower().split())))) for c in self.chunks]
        return sorted(scored, key=lambda h: (-h.score, h.chunk_id))[:k]


def _retriever(tmp_path: Path, **options: Any) -> Any:
    cfg = {"name": "q", "kind": "query_expansion", "first_stage": {"name": "r", "kind": "test_recording"}}
    retriever = build_retriever({**cfg, "llm": FAKE_LLM, **options})
    retriever.build(CHUNKS, tmp_path)
    retriever.load(CHUNKS, tmp_path)
    return retriever


def test_concat_searches_the_question_followed_by_the_passage(tmp_path: Path) -> None:
    retriever = _retriever(tmp_path)
    retriever.search("my keyboard repeats letters", 2)
    assert retriever.first_stage.queries == ["my keyboard repeats letters\nOpen Settings, then Accessibility."]
    assert retriever.first_stage.built == [tmp_path / "first_stage"]
    assert retriever.trace("my keyboard repeats letters")["prompt"].startswith("hyde_passage_v1@")
    assert "rewrite_ms" in retriever.last_timings
    prompt = retriever.llm.backend.requests[0]["prompt"]
    assert "Question: my keyboard repeats letters" in prompt and "$query" not in prompt


def test_passage_mode_searches_the_passage_alone_and_an_empty_passage_keeps_the_question(tmp_path: Path) -> None:
    retriever = _retriever(tmp_path, mode="passage")
    retriever.search("my keyboard repeats letters", 2)
    retriever.search("printer offline", 2)  # the fake LLM answers "" to this one
    assert retriever.first_stage.queries == ["Open Settings, then Accessibility.", "printer offline"]


def test_the_passage_changes_the_ranking(tmp_path: Path) -> None:
    llm = {**FAKE_LLM, "responses": {"keyboard": "Turn on bounce keys"}}
    plain = build_retriever({"name": "r", "kind": "test_recording"})
    plain.load(CHUNKS, tmp_path)
    assert plain.search("keyboard trouble printer", 1)[0].chunk_id == CHUNKS[1].id
    expanded = _retriever(tmp_path, llm=llm)
    assert expanded.search("keyboard trouble printer", 1)[0].chunk_id == CHUNKS[0].id


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"mode": "both"}, "unknown mode 'both'"),
        ({"max_tokens": 0}, "max_tokens must be >= 1"),
        ({"llm": None}, "needs an `llm`"),
    ],
)
def test_bad_options_are_named(tmp_path: Path, options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _retriever(tmp_path, **options)


def test_the_shipped_option_composes_with_a_dense_mpnet_first_stage() -> None:
    cfg = to_dict(compose(["+retriever@systems.h=hyde_mpnet"]).systems.h)
    assert cfg["kind"] == "query_expansion" and cfg["first_stage"]["name"] == "dense_mpnet"
    assert cfg["llm"]["name"] == "qwen_coder_05b" and cfg["mode"] == "concat"
    with pytest.raises(ConfigError, match="rewrites"):
        build_retriever({**cfg, "rewrites": 2})
