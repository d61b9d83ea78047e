"""Real local models (slow): llama-cpp-python's OpenAI-compatible server, and LLM extraction with a GGUF.

Both need `pip install -e '.[llm]'` (compiles llama.cpp) and the 0.5B model assembled with
`fixgraph llm assemble qwen2.5-coder-0.5b-instruct-q4_k_m`; without them they are skipped, saying why.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from omegaconf import DictConfig

from fixgraph.llm.gguf import CATALOG
from tests.conftest import REPO
from tests.integration.conftest import GGUF, MODEL, REAL_MODEL

pytestmark = REAL_MODEL

SCHEMA = {
    "type": "object",
    "properties": {"app": {"type": "string"}, "steps": {"type": "integer"}},
    "required": ["app", "steps"],
    "additionalProperties": False,
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(GGUF),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "2048",
            "--model_alias",
            "qwen-0.5b",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1"
    import httpx

    deadline = time.time() + 300
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(1)
    else:
        proc.kill()
        pytest.fail("llama_cpp.server did not come up within 300 s")
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def test_openai_compatible_backend_against_llama_cpp_server(server: str) -> None:
    from fixgraph.llm.backends.openai_compat import OpenAICompatibleLLM
    from fixgraph.llm.client import LLMClient

    backend = OpenAICompatibleLLM(
        model="qwen-0.5b", base_url=server, schema_mode="json_object", timeout_s=600, model_digest=CATALOG[MODEL].sha256
    )
    client = LLMClient(backend)
    assert client.identity() == f"openai:qwen-0.5b@{CATALOG[MODEL].sha256}"
    result = client.complete_json(
        "Text: Open the Files app and click Trash, then Empty. Which app is used and how many steps are there?",
        SCHEMA,
        temperature=0.0,
        max_tokens=60,
    )
    assert set(result.value) == {"app", "steps"} and isinstance(result.value["steps"], int)
    usage = client.usage.totals()["default"]
    assert usage["input_tokens"] > 20 and usage["output_tokens"] > 3


def test_llm_extraction_with_a_real_gguf(fixture_config: Callable[..., DictConfig]) -> None:
    from fixgraph.kg.store import GraphStore
    from fixgraph.pipeline import graph as graph_stage

    cfg = fixture_config(
        [
            "extractor=llm",
            "llm=qwen_coder_05b",
            f"llm.model_dir={REPO / 'models'}",
            "extractor.max_chunks=2",
            "tracking.enabled=false",
        ]
    )
    store = GraphStore.read(graph_stage.build(cfg).output)
    report = store.report
    assert report["extraction"]["chunks"] == 2
    tokens = report["llm_usage"]["tokens_per_chunk"]
    assert 0 < tokens["input_mean"] < 790 and 0 < tokens["output_mean"] < 400
    assert report["llm_usage"]["extract"]["calls"] >= 2
    records = report["records"]
    assert records["extracted"] > 0
    assert (
        len(store.mentions) + records["rejected_grounding"] + records["rejected_verification"] <= records["extracted"]
    )
    # whatever the small model says, every stored mention is grounded in its chunk with an LLM provenance
    assert (store.mentions["extractor"] == "llm").all()
    assert store.mentions["model"].str.startswith("gguf:sha256:1d961463").all()
    assert store.mentions["prompt_version"].str.startswith("extract_v1@").all()


def test_llamacpp_first_token_logprobs_rank_a_relevant_passage_higher(tmp_path: Path) -> None:
    from fixgraph.llm.base import build_llm
    from fixgraph.retrieval.llm_rerank import PROMPT, yes_probability

    llm = build_llm(
        {
            "name": "qwen",
            "kind": "llamacpp",
            "model": MODEL,
            "model_dir": str(REPO / "models"),
            "n_ctx": 1024,
            "n_threads": 1,
            "generation": {"temperature": 0.0, "seed": 0},
            "cache": {"enabled": True, "path": str(tmp_path / "llm.sqlite")},
        }
    )
    question = "How do I change my desktop wallpaper?"
    good = "To change the desktop background, open Settings, click Background and choose an image."
    bad = "The printer's ink cartridge must be replaced when the light blinks orange."
    replies = [
        llm.complete(PROMPT.format(query=question, passage=p), max_tokens=1, logprobs=True, top_logprobs=10)
        for p in (good, bad)
    ]
    for reply in replies:
        assert reply.top_logprobs and len(reply.top_logprobs) <= 10
        assert all(lp <= 0 for lp in reply.top_logprobs.values())
    assert yes_probability(replies[0]) > yes_probability(replies[1])
    cached = llm.complete(PROMPT.format(query=question, passage=good), max_tokens=1, logprobs=True, top_logprobs=10)
    assert cached.cached and cached.top_logprobs == replies[0].top_logprobs
