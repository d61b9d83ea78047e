"""The service with the real 0.5B GGUF on llama.cpp (slow), over HTTP against a real uvicorn server:
tokens stream from llama.cpp as it decodes, the answer parses and cites, and a client that leaves
stops decoding. Skipped, saying why, without llama-cpp-python or the assembled model."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
from omegaconf import DictConfig

from fixgraph.serve.app import create_app
from fixgraph.serve.service import Service
from fixgraph.serve.settings import build_settings
from fixgraph.serve.source import composed
from tests.conftest import REPO
from tests.integration.conftest import REAL_MODEL
from tests.serve_helpers import running, sse_events, stream, wait_for

pytestmark = REAL_MODEL


def test_real_model_streams_a_cited_answer_and_stops_when_the_client_leaves(
    fixture_config: Callable[..., DictConfig],
) -> None:
    cfg = fixture_config(
        [
            "tracking.enabled=false",
            "llm=qwen_coder_05b",
            f"llm.model_dir={REPO / 'models'}",
            "llm.cache.enabled=false",
            "answer.max_chunks=3",
            "answer.max_tokens=120",
        ]
    )
    service = Service(composed(cfg), build_settings(cfg.serve))
    with running(create_app(service)) as base:
        events = stream(base, "/ask/stream", {"question": "The hub's light blinks amber. What should I do?"}, 600)
        names = [e for e, _ in events]
        assert names[-1] == "done", events[-1]
        tokens = [d["text"] for e, d in events if e == "token"]
        done = events[-1][1]
        assert len(tokens) >= 3 and "".join(tokens) == done["answer"]  # llama.cpp streamed it piece by piece
        assert done["reply_format"] in ("json", "truncated_json")  # constrained decoding: JSON
        assert done["usage"]["answer"]["output_tokens"] >= len(tokens)
        assert done["usage"]["answer"]["input_tokens"] > 100  # the prompt with three chunks
        assert done["latency"]["first_token_ms"] < done["latency"]["total_ms"]
        cited = [c for s in done["sentences"] for c in s["citations"]]
        for cite in cited:
            assert cite["chunk_id"] in done["context_ids"]
        # leave mid-answer: decoding stops (the llama.cpp context is free for the next request at once)
        with httpx.stream("POST", f"{base}/ask/stream", json={"question": "How do I reset the hub?"}, timeout=600) as r:
            for event, _ in sse_events(r):
                if event == "token":
                    break
        assert wait_for(lambda: httpx.get(f"{base}/health").json()["streams"].get("cancelled") == 1, timeout=30)
        started = time.monotonic()
        after = httpx.post(f"{base}/search", json={"query": "hub"}, timeout=60)
        assert after.status_code == 200
        follow = stream(base, "/ask/stream", {"question": "Why does the widget battery drain?", "verify": False}, 600)
        assert follow[-1][0] == "done" and time.monotonic() - started < 300
