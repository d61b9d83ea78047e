"""The LLM client: cache keys, usage per stage, structured output with one retry, concurrency limit."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from fixgraph.llm.base import Completion, FakeLLM, build_llm
from fixgraph.llm.cache import LLMCache, cache_key
from fixgraph.llm.client import LLMClient
from fixgraph.llm.structured import StructuredOutputError, check, parse_json
from fixgraph.llm.usage import metering, usage_metrics

SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}},
    "required": ["answer"],
    "additionalProperties": False,
}


def test_fake_llm_scripts_replies_and_records_requests() -> None:
    fake = FakeLLM(script=["one", {"a": 1}], responses={"hello": "hi"}, default="?")
    assert fake.complete("x", temperature=0).text == "one"
    assert fake.complete("x").text == '{"a": 1}'
    assert fake.complete("say hello").text == "hi"
    assert fake.complete("other").text == "?"
    assert fake.requests[0] == {"prompt": "x", "temperature": 0}
    assert len(fake.requests) == 4


def test_cache_serves_identical_requests_and_misses_on_any_change(tmp_path: Path) -> None:
    fake = FakeLLM(default="answer", model="m1")
    client = LLMClient(fake, cache={"enabled": True, "path": str(tmp_path / "llm.sqlite")})
    first = client.complete("prompt", temperature=0.0, max_tokens=10)
    second = client.complete("prompt", temperature=0.0, max_tokens=10)
    assert (first.cached, second.cached) == (False, True)
    assert second.text == "answer" and len(fake.requests) == 1
    client.complete("prompt", temperature=0.5, max_tokens=10)  # another parameter
    client.complete("prompt ", temperature=0.0, max_tokens=10)  # another prompt
    assert len(fake.requests) == 3
    # another model identity never sees the first model's answers, even through the same file
    other = LLMClient(FakeLLM(default="x", model="m2"), cache={"path": str(tmp_path / "llm.sqlite")})
    assert other.complete("prompt", temperature=0.0, max_tokens=10).cached is False
    # and the file persists across clients of the same model
    again = LLMClient(FakeLLM(default="never", model="m1"), cache={"path": str(tmp_path / "llm.sqlite")})
    assert again.complete("prompt", temperature=0.0, max_tokens=10).text == "answer"


def test_cache_key_covers_backend_model_params_and_prompt() -> None:
    base = cache_key("fake", "m", {"temperature": 0, "schema": {"type": "object"}}, "p")
    assert base == cache_key("fake", "m", {"schema": {"type": "object"}, "temperature": 0}, "p")  # order-free
    variants = [
        cache_key("ollama", "m", {"temperature": 0, "schema": {"type": "object"}}, "p"),
        cache_key("fake", "m2", {"temperature": 0, "schema": {"type": "object"}}, "p"),
        cache_key("fake", "m", {"temperature": 0, "schema": {"type": "array"}}, "p"),
        cache_key("fake", "m", {"temperature": 0, "schema": {"type": "object"}}, "q"),
    ]
    assert base not in variants and len(set(variants)) == 4


def test_cache_file_is_readable_sqlite(tmp_path: Path) -> None:
    import sqlite3

    cache = LLMCache(tmp_path / "c.sqlite")
    cache.put("k", "fake", "m", {"t": 0}, "p", Completion("text", 3, 1, 0.5))
    row = (
        sqlite3.connect(tmp_path / "c.sqlite")
        .execute("SELECT backend, model, prompt, text FROM completions")
        .fetchone()
    )
    assert row == ("fake", "m", "p", "text")
    assert len(cache) == 1


def test_usage_is_summed_per_stage_and_cached_calls_cost_no_time(tmp_path: Path) -> None:
    class Timed(FakeLLM):
        def complete(self, prompt: str, **params: Any) -> Completion:
            done = super().complete(prompt, **params)
            return Completion(done.text, done.input_tokens, done.output_tokens, 2.0)

    client = LLMClient(Timed(default="a b c"), cache={"path": str(tmp_path / "c.sqlite")})
    client.complete("one two", stage="extract")
    client.complete("one two", stage="extract")  # cache hit
    client.complete("x", stage="verify")
    totals = client.usage.totals()
    assert totals["extract"] == {"calls": 2, "cached_calls": 1, "input_tokens": 4, "output_tokens": 6, "seconds": 2.0}
    assert totals["verify"]["input_tokens"] == 1
    assert usage_metrics(totals)["llm_extract_output_tokens"] == 6.0


def test_structured_output_retries_once_with_the_error() -> None:
    fake = FakeLLM(script=["not json", '{"answer": 4}'])
    client = LLMClient(fake)
    result = client.complete_json("What is 2+2?", SCHEMA)
    assert result.value == {"answer": 4} and result.retried
    retry_prompt = fake.requests[1]["prompt"]
    assert retry_prompt.startswith("What is 2+2?") and "not valid: not JSON" in retry_prompt
    assert "schema" not in fake.requests[0]  # this backend has no constrained decoding


def test_structured_output_gives_up_after_one_retry() -> None:
    fake = FakeLLM(script=['{"answer": "four"}', '{"answer": 4, "extra": 1}'])
    with pytest.raises(StructuredOutputError, match="after a retry") as err:
        LLMClient(fake).complete_json("q", SCHEMA)
    assert len(err.value.completions) == 2 and len(fake.requests) == 2
    assert "answer" in fake.requests[1]["prompt"]  # the first error (wrong type at /answer) was shown


def test_schema_goes_to_backends_that_constrain_decoding() -> None:
    fake = FakeLLM(script=['{"answer": 1}'], supports_schema=True)
    LLMClient(fake).complete_json("q", SCHEMA, temperature=0)
    assert fake.requests[0]["schema"] == SCHEMA


def test_check_tolerates_code_fences_and_reports_where_validation_failed() -> None:
    assert parse_json('```json\n{"answer": 1}\n```') == {"answer": 1}
    value, error = check('{"answer": "x"}', SCHEMA)
    assert value is None and error is not None and error.startswith("at answer:")


def test_concurrency_limit_bounds_backend_calls() -> None:
    active, peak = 0, 0
    lock = threading.Lock()

    class Slow(FakeLLM):
        def complete(self, prompt: str, **params: Any) -> Completion:
            nonlocal active, peak
            with lock:
                active += 1
                peak = max(peak, active)
            time.sleep(0.05)
            with lock:
                active -= 1
            return Completion(prompt.upper(), 1, 1, 0.05)

    client = LLMClient(Slow(), max_concurrency=2)
    # four worker threads, but the client's semaphore admits two backend calls at a time
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=4) as pool:
        texts = list(pool.map(lambda p: client.complete(p).text, ["a", "b", "c", "d", "e", "f"]))
    assert texts == ["A", "B", "C", "D", "E", "F"]
    assert peak == 2
    assert list(client.map(lambda p: p * 2, ["x", "y"])) == ["xx", "yy"]


def test_build_llm_wraps_the_configured_backend(tmp_path: Path) -> None:
    client = build_llm(
        {
            "name": "fake",
            "kind": "fake",
            "default": "d",
            "max_concurrency": 3,
            "cache": {"enabled": True, "path": str(tmp_path / "c.sqlite")},
            "generation": {"temperature": 0.0},
        }
    )
    assert isinstance(client, LLMClient) and client.max_concurrency == 3 and client.cache is not None
    client.complete("p")
    assert client.backend.requests == [{"prompt": "p", "temperature": 0.0}]  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="max_concurrency"):
        build_llm({"name": "fake", "kind": "fake", "max_concurrency": 0})


def test_cache_keeps_first_token_logprobs_and_reads_older_files(tmp_path: Path) -> None:
    import sqlite3

    old = tmp_path / "old.sqlite"  # a cache written before the top_logprobs column existed
    db = sqlite3.connect(old)
    db.execute(
        "CREATE TABLE completions (key TEXT PRIMARY KEY, backend TEXT NOT NULL, model TEXT NOT NULL, params TEXT "
        "NOT NULL, prompt TEXT NOT NULL, text TEXT NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER "
        "NOT NULL, seconds REAL NOT NULL, created REAL NOT NULL)"
    )
    db.execute("INSERT INTO completions VALUES ('a', 'fake', 'm', '{}', 'p', 'yes', 1, 1, 0.1, 0)")
    db.commit()
    db.close()
    cache = LLMCache(old)
    got = cache.get("a")
    assert got is not None and got.text == "yes" and got.top_logprobs is None
    cache.put("b", "fake", "m", {}, "p", Completion("Yes", 3, 1, 0.5, top_logprobs={"Yes": -0.1, "No": -2.4}))
    again = cache.get("b")
    assert again is not None and again.top_logprobs == {"Yes": -0.1, "No": -2.4}


def test_first_token_logprobs_is_a_log_softmax_by_token_text() -> None:
    import numpy as np
    from scipy.special import log_softmax

    from fixgraph.llm.backends.llamacpp import first_token_logprobs

    logits = np.array([2.0, -1.0, 0.5, 3.0, 0.5])
    texts = {0: b"Yes", 1: b"No", 2: b"yes", 3: b"The", 4: b"yes"}  # ids 2 and 4 decode to the same text
    top = first_token_logprobs(logits, 4, lambda ids: texts[ids[0]])
    reference = log_softmax(logits)
    assert top == pytest.approx({"The": reference[3], "Yes": reference[0], "yes": reference[2]})


def test_metering_counts_every_client_inside_the_block_and_nothing_outside(tmp_path: Path) -> None:
    first = LLMClient(FakeLLM(default="a b"), cache={"path": str(tmp_path / "c.sqlite")})
    second = LLMClient(FakeLLM(default="c"), max_concurrency=2)
    first.complete("before the block")
    with metering() as outer:
        first.complete("one two", stage="rewrite")
        first.complete("one two", stage="rewrite")  # a cache hit: tokens counted, flagged cached
        with metering() as inner:
            # calls made on the client's worker threads count too
            assert list(second.map(lambda p: second.complete(p, stage="rerank").text, ["x", "y z"])) == ["c", "c"]
    first.complete("after the block")
    assert outer.totals()["rewrite"] == {
        "calls": 2,
        "cached_calls": 1,
        "input_tokens": 4,
        "output_tokens": 4,
        "seconds": 0.0,
    }
    assert outer.totals()["rerank"]["calls"] == 2 and outer.totals()["rerank"]["input_tokens"] == 3
    assert inner.totals() == {"rerank": outer.totals()["rerank"]}
    assert first.usage.totals()["default"]["calls"] == 2  # the client's own totals are unchanged in kind
