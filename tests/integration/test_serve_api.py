"""The service over HTTP: a real uvicorn server on the fixture corpus's real indexes, the fake LLM.

Every request goes through the network (httpx -> uvicorn -> FastAPI), never a handler call.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from omegaconf import DictConfig, OmegaConf

from fixgraph.config import systems_of
from fixgraph.corpus.store import read_documents
from fixgraph.pipeline import graph as graph_stage
from fixgraph.pipeline.layout import Layout
from fixgraph.pipeline.stages import load_chunks, open_system
from fixgraph.serve.app import create_app
from fixgraph.serve.service import Service
from fixgraph.serve.settings import build_settings
from fixgraph.serve.source import composed
from tests.serve_helpers import running, sse_events, stream, wait_for

QUOTE = "Move the hub closer to the router"
REPLY = {
    "abstain": False,
    "sentences": [
        {"text": "Move the hub closer to the router and try again.", "citations": [1, 9]},
        {"text": 'Unplug the "hub" for ten seconds.', "citations": [2]},
    ],
}
LONG_REPLY = " ".join(f"word{i}" for i in range(300))


def make_config(base: Callable[..., DictConfig], overrides: list[str], llm: dict[str, Any] | None = None) -> DictConfig:
    cfg = base(["tracking.enabled=false", *overrides])
    for key, value in (llm or {}).items():
        OmegaConf.update(cfg, f"llm.{key}", value, merge=False)
    return cfg


@pytest.fixture(scope="module")
def base_config(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., DictConfig]:
    """fixture_config, shared by the module: one artefact folder, so indexes are built once."""
    import shutil

    from fixgraph.config import compose
    from tests.conftest import CONF, FIXTURES

    root = tmp_path_factory.mktemp("serve")
    shutil.copytree(FIXTURES / "mallard", root / "pages")

    def make(overrides: list[str]) -> DictConfig:
        import os

        os.environ["FIXGRAPH_CONFIG_DIR"] = str(CONF)
        return compose(
            [
                "corpus=mallard_folder",
                f"corpus.snapshot_dir={root / 'pages'}",
                "embedder=hashing",
                "split=pool",
                f"split.questions={FIXTURES / 'questions.jsonl'}",
                f"paths.artifacts={root / 'artifacts'}",
                f"paths.mlruns={root / 'mlruns'}",
                f"tracking.uri=sqlite:///{root / 'mlflow.db'}",
                "evaluation.bootstrap.resamples=200",
                "evaluation.min_gold_coverage=0.9",
                *overrides,
            ]
        )

    return make


def serve(cfg: DictConfig) -> Service:
    return Service(composed(cfg), build_settings(cfg.serve))


@pytest.fixture(scope="module")
def service(base_config: Callable[..., DictConfig]) -> Service:
    verdict = {"supported": True, "quote": QUOTE}
    # verification is batched (answer.verify.batch): one call checks the answer's two (sentence, source) pairs
    checks = {"verdicts": [{"check": 1, **verdict}, {"check": 2, **verdict}]}
    cfg = make_config(
        base_config,
        [],
        {"responses": {"using ONLY the numbered sources": REPLY, "Check each claim below": checks}},
    )
    graph_stage.build(cfg, track=False)
    return serve(cfg)


@pytest.fixture(scope="module")
def base(service: Service) -> Iterator[str]:
    with running(create_app(service)) as url:
        yield url


def documents(service: Service) -> dict[str, str]:
    return {d.id: d.text for d in read_documents(Layout.from_config(service.cfg).documents)}


def test_health_config_and_openapi_docs(base: str, service: Service) -> None:
    health = httpx.get(f"{base}/health").json()
    assert health["status"] == "ok" and health["system"] == "hybrid" and health["graph"] is True
    assert health["chunks"] == len(load_chunks(service.cfg))
    config = httpx.get(f"{base}/config").json()
    assert config["system"] == "hybrid" and config["systems"] == ["bm25", "dense", "hybrid"]
    assert config["origin"] == {"kind": "composed"} and config["config"]["corpus"]["name"] == "mallard_folder"
    spec = httpx.get(f"{base}/openapi.json").json()
    assert {"/search", "/ask", "/ask/stream", "/diagnose", "/diagnose/stream", "/health"} <= set(spec["paths"])
    assert "/graph/{node_id}" in spec["paths"] and httpx.get(f"{base}/docs").status_code == 200


def test_search_ranks_exactly_like_the_benchmarks_system(base: str, service: Service) -> None:
    query = "status light blinking amber"
    body = httpx.post(f"{base}/search", json={"query": query, "k": 5}).json()
    # the benchmark's own entry point, opened independently of the service
    chunks = load_chunks(service.cfg)
    system = open_system(service.cfg, "hybrid", systems_of(service.cfg)["hybrid"], chunks)
    expected = system.search(query, 5)
    assert [h["chunk_id"] for h in body["hits"]] == [h.chunk_id for h in expected]
    assert [h["score"] for h in body["hits"]] == pytest.approx([h.score for h in expected])
    texts = documents(service)
    for hit in body["hits"]:  # offsets point at the chunk's text inside its document
        assert texts[hit["doc_id"]][hit["start"] : hit["end"]] == hit["text"]
    assert {"first_stage_ms", "rerank_ms", "search_ms"} <= set(body["timings"])
    other = httpx.post(f"{base}/search", json={"query": query, "k": 3, "system": "bm25"}).json()
    bm25 = open_system(service.cfg, "bm25", systems_of(service.cfg)["bm25"], chunks).search(query, 3)
    assert other["system"] == "bm25" and [h["chunk_id"] for h in other["hits"]] == [h.chunk_id for h in bm25]


def test_ask_cites_spans_strips_foreign_numbers_and_verifies(base: str, service: Service) -> None:
    answer = httpx.post(f"{base}/ask", json={"question": "status light blinking amber, hub won't get online"}).json()
    assert answer["answer"] == 'Move the hub closer to the router and try again. Unplug the "hub" for ten seconds.'
    assert answer["stripped_citations"] == 1  # source 9 is outside a six-chunk context
    first, second = answer["sentences"]
    assert [c["chunk_id"] for c in first["citations"]] == [answer["context_ids"][0]]
    assert [c["chunk_id"] for c in second["citations"]] == [answer["context_ids"][1]]
    texts = documents(service)
    for sentence in answer["sentences"]:
        for cite in sentence["citations"]:
            assert texts[cite["doc_id"]][cite["start"] : cite["end"]] == cite["quote"]
            if QUOTE in cite["quote"] or cite["verdict"] == "supported":
                # the verifier's quote, located where it really is in the document
                assert cite["span_source"] == "verifier" and cite["quote"] == QUOTE
                assert texts[cite["doc_id"]].find(QUOTE) == cite["start"]
    assert answer["verification"]["enabled"] and answer["usage"]["answer"]["calls"] == 1
    assert answer["usage"]["verify"]["calls"] == 1 and answer["usage"]["total_tokens"] > 0
    assert {"retrieve_ms", "first_token_ms", "generate_ms", "verify_ms", "total_ms"} <= set(answer["latency"])
    unverified = httpx.post(f"{base}/ask", json={"question": "hub offline", "verify": False}).json()
    assert unverified["verification"]["enabled"] is False and "verify" not in unverified["usage"]


def test_ask_stream_sends_meta_tokens_citations_then_done(base: str) -> None:
    events = stream(base, "/ask/stream", {"question": "status light blinking amber", "k": 3})
    names = [e for e, _ in events]
    assert names[:2] == ["progress", "meta"] and names[-1] == "done" and "error" not in names
    assert names.index("meta") < names.index("token") < names.index("citation") < names.index("done")
    meta = dict(events)["meta"]
    assert meta["system"] == "hybrid" and len(meta["retrieved"]) == 3 and "search_ms" in meta["timings"]
    done = events[-1][1]
    streamed = "".join(d["text"] for e, d in events if e == "token")
    assert streamed == done["answer"]  # the deltas assemble into exactly the final text
    cited = [d for e, d in events if e == "citation"]
    assert [c["text"] for c in cited] == [s["text"] for s in done["sentences"]]
    assert [[x["chunk_id"] for x in c["citations"]] for c in cited] == [
        [x["chunk_id"] for x in s["citations"]] for s in done["sentences"]
    ]
    stages = [d["stage"] for e, d in events if e == "progress"]
    assert stages == ["retrieving", "generating", "verifying"]


def test_request_limits_are_clear_4xx(base: str, service: Service) -> None:
    limits = service.settings
    long = httpx.post(f"{base}/ask", json={"question": "x" * (limits.max_question_chars + 1)})
    assert long.status_code == 413 and "serve.max_question_chars" in long.json()["detail"]
    log = httpx.post(f"{base}/diagnose", json={"log": "e" * (limits.max_log_bytes + 1)})
    assert log.status_code == 413 and "serve.max_log_bytes" in log.json()["detail"]
    body = httpx.post(f"{base}/search", content=b"{" + b" " * limits.max_body_bytes + b"}")
    assert body.status_code == 413 and "serve.max_body_bytes" in body.json()["detail"]
    k = httpx.post(f"{base}/search", json={"query": "hub", "k": limits.max_k + 1})
    assert k.status_code == 422 and "serve.max_k" in k.json()["detail"]
    unknown = httpx.post(f"{base}/search", json={"query": "hub", "system": "nope"})
    assert unknown.status_code == 404 and "bm25" in unknown.json()["detail"]
    typo = httpx.post(f"{base}/search", json={"query": "hub", "kk": 3})
    assert typo.status_code == 422 and "kk" in typo.text
    assert httpx.get(f"{base}/documents/nope").status_code == 404


def test_documents_graph_neighbourhood_and_evidence(base: str, service: Service) -> None:
    doc = httpx.get(f"{base}/documents/wifi-trouble").json()
    assert doc["title"] == "The hub does not connect to Wi-Fi" and QUOTE in doc["text"]
    assert all(doc["text"][c["start"] : c["end"]] for c in doc["chunks"])
    chunk_ids = [c["chunk_id"] for c in doc["chunks"]]
    evidence = httpx.post(f"{base}/graph/evidence", json={"chunk_ids": chunk_ids}).json()
    assert evidence["nodes"] and evidence["edges"]
    node_ids = {n["node_id"] for n in evidence["nodes"]}
    for edge in evidence["edges"]:
        assert {edge["source"], edge["target"]} <= node_ids
        for mention in edge["mentions"]:  # provenance: the evidence is the document's text at that span
            assert mention["chunk_id"] in chunk_ids
            assert doc["text"][mention["start"] : mention["end"]] == mention["evidence"]
    article = next(n for n in evidence["nodes"] if n["type"] == "Article")
    hood = httpx.get(f"{base}/graph/{article['node_id']}").json()
    assert hood["node"]["node_id"] == article["node_id"] and hood["edges"]
    assert all(article["node_id"] in (e["source"], e["target"]) for e in hood["edges"])
    assert httpx.get(f"{base}/graph/Article%7C%7Cdoc:nope").status_code == 404


def test_compare_places_the_gold_of_a_split_question(base: str, service: Service) -> None:
    questions = httpx.get(f"{base}/questions").json()
    assert [q["qid"] for q in questions][:2] == ["t-1", "t-2"]
    result = httpx.post(f"{base}/compare", json={"qid": "t-2", "systems": ["bm25", "dense"], "k": 3}).json()
    assert result["answer_pages"] == ["reset-hub"] and result["gold"]
    chunks = load_chunks(service.cfg)
    for side in result["systems"]:
        system = open_system(service.cfg, side["system"], systems_of(service.cfg)[side["system"]], chunks)
        ranking = [h.chunk_id for h in system.search(result["question"], result["depth"])]
        for gold, rank in side["gold_ranks"].items():
            assert rank == (ranking.index(gold) + 1 if gold in ranking else None)
        assert [h["chunk_id"] for h in side["hits"]] == ranking[:3]
    free = httpx.post(f"{base}/compare", json={"question": "hub light", "systems": ["bm25", "hybrid"]}).json()
    assert free["gold"] == [] and all(s["gold_ranks"] == {} for s in free["systems"])


def test_diagnose_links_signatures_and_cites_causes(base: str, service: Service) -> None:
    log = "Dec 01 09:00:00 host hubd[42]: error: status light blinks amber, hub cannot reach router\n"
    result = httpx.post(f"{base}/diagnose", json={"log": log}).json()
    kinds = {(s["kind"], s["value"]) for s in result["signatures"]}
    assert ("command", "hubd") in kinds and any(k == "message" for k, _ in kinds)
    assert result["causes"][0]["doc_id"] == "wifi-trouble"
    texts = documents(service)
    for cause in result["causes"]:
        for cite in [*cause["cause"], *cause["fixes"], cause["passage"]]:
            assert texts[cite["doc_id"]][cite["start"] : cite["end"]] == cite["text"]
    events = stream(base, "/diagnose/stream", {"log": log})
    assert [e for e, _ in events][:2] == ["progress", "meta"] and events[-1][0] == "done"
    assert events[-1][1]["explanation"]["answer"] and events[-1][1]["causes"] == result["causes"]


def test_api_key_guards_everything_but_health(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIXGRAPH_TEST_KEY", "s3cret-key")
    settings = replace(service.settings, api_key_env="FIXGRAPH_TEST_KEY")
    with running(create_app(service, settings)) as url:
        assert httpx.get(f"{url}/health").status_code == 200
        refused = httpx.post(f"{url}/search", json={"query": "hub"})
        assert refused.status_code == 401 and "FIXGRAPH_TEST_KEY" in refused.json()["detail"]
        wrong = httpx.post(f"{url}/search", json={"query": "hub"}, headers={"X-API-Key": "nope"})
        assert wrong.status_code == 401
        ok = httpx.post(f"{url}/search", json={"query": "hub"}, headers={"Authorization": "Bearer s3cret-key"})
        assert ok.status_code == 200
        assert "s3cret-key" not in httpx.get(f"{url}/config", headers={"X-API-Key": "s3cret-key"}).text


def test_client_disconnect_cancels_generation(base_config: Callable[..., DictConfig]) -> None:
    cfg = make_config(base_config, [], {"default": LONG_REPLY, "token_delay_s": 0.02})
    slow = serve(cfg)
    backend = slow.llm.backend
    with running(create_app(slow)) as url:
        with httpx.stream("POST", f"{url}/ask/stream", json={"question": "hub"}, timeout=30) as response:
            seen = 0
            for event, _ in sse_events(response):
                seen += event == "token"
                if seen == 3:
                    break  # leaving the block closes the connection mid-answer
        assert wait_for(lambda: httpx.get(f"{url}/health").json()["streams"].get("cancelled") == 1)
        produced = backend.streamed_tokens
        time.sleep(0.3)  # generation has stopped: no more tokens are produced
        assert backend.streamed_tokens == produced < 300
        health = httpx.get(f"{url}/health").json()["streams"]
        assert health["active"] == 0 and "completed" not in health


def test_llm_down_gives_an_error_event_and_a_503(base_config: Callable[..., DictConfig], caplog: Any) -> None:
    import socket

    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cfg = base_config(
        [
            "tracking.enabled=false",
            "llm=openai_compatible",
            f"llm.base_url=http://127.0.0.1:{port}/v1",
            "llm.api_key=sk-very-secret",
            "llm.cache.enabled=false",
        ]
    )
    down = serve(cfg)
    with running(create_app(down)) as url:
        events = stream(url, "/ask/stream", {"question": "hub"}, timeout=30)
        assert events[-1][0] == "error" and events[-1][1]["code"] == "llm_unavailable"
        assert "cannot reach the server" in events[-1][1]["message"]
        blocking = httpx.post(f"{url}/ask", json={"question": "hub"}, timeout=30)
        assert blocking.status_code == 503 and "llm_unavailable" in blocking.json()["detail"]
        assert "sk-very-secret" not in httpx.get(f"{url}/config").text
        assert httpx.get(f"{url}/health").json()["streams"]["failed"] == 2
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "llm_unavailable" in logged and "sk-very-secret" not in logged


def test_garbage_reply_and_stalled_model_end_the_stream_with_an_error(
    base_config: Callable[..., DictConfig],
) -> None:
    garbage = serve(make_config(base_config, [], {"default": '{"abstain": tru'}))
    with running(create_app(garbage)) as url:
        events = stream(url, "/ask/stream", {"question": "hub"})
        assert events[-1] == ("error", events[-1][1]) and events[-1][1]["code"] == "llm_garbage"
    stalled_cfg = make_config(base_config, ["serve.stream_idle_timeout_s=0.5"], {"delay_s": 3.0})
    stalled = serve(stalled_cfg)
    with running(create_app(stalled)) as url:
        started = time.monotonic()
        events = stream(url, "/ask/stream", {"question": "hub"})
        assert time.monotonic() - started < 2.5  # the stream ended on the idle timeout, not the model
        assert events[-1][0] == "error" and events[-1][1]["code"] == "timeout"


def test_too_many_streams_get_a_503(base_config: Callable[..., DictConfig]) -> None:
    cfg = make_config(base_config, ["serve.max_streams=1"], {"default": LONG_REPLY, "token_delay_s": 0.01})
    busy = serve(cfg)
    with (
        running(create_app(busy)) as url,
        httpx.stream("POST", f"{url}/ask/stream", json={"question": "hub"}, timeout=30) as first,
    ):
        events = sse_events(first)  # kept: dropping the reader would close the connection
        assert next(events)[0] == "progress"
        second = httpx.post(f"{url}/ask/stream", json={"question": "hub"}, timeout=30)
        assert second.status_code == 503 and "serve.max_streams=1" in second.json()["detail"]


def test_request_log_has_no_bodies(base: str, caplog: Any) -> None:
    import logging

    caplog.set_level(logging.INFO, logger="fixgraph.serve.requests")
    secret_question = "my password is hunter2, why does the hub blink"
    httpx.post(f"{base}/search", json={"query": secret_question})
    lines = [r.getMessage() for r in caplog.records if r.name == "fixgraph.serve.requests"]
    assert any(line.startswith("POST /search 200") for line in lines)
    assert not any("hunter2" in line for line in lines)


def test_runs_tab_reads_evaluations_with_cis_and_comparison(base_config: Callable[..., DictConfig]) -> None:
    from fixgraph.experiment.runners import build_experiment

    cfg = base_config(["tracking.enabled=true", "comparison.plots=false"])
    result = build_experiment(cfg.experiment).run(cfg, None, "dev-serve", track=True)
    served = serve(cfg)
    with running(create_app(served)) as url:
        runs = httpx.get(f"{url}/runs").json()
        mine = next(r for r in runs if r["run_id"] == result.mlflow_run_id)
        assert mine["evaluation"] == "dev-serve" and mine["link"].endswith(f"/runs/{result.mlflow_run_id}")
        detail = httpx.get(f"{url}/runs/{result.mlflow_run_id}").json()
    by_system = {s["system"]: s["metrics"] for s in detail["systems"]}
    assert set(by_system) == set(result.metrics)
    for system, metrics in result.metrics.items():
        got = by_system[system]["recall_at_8"]
        assert got["mean"] == pytest.approx(metrics["recall_at_8"]["mean"])
        assert (got["ci_low"], got["ci_high"]) == pytest.approx(
            (metrics["recall_at_8"]["low"], metrics["recall_at_8"]["high"])
        )
    written = json.loads((Path(result.output_dir) / "comparison.json").read_text())
    assert detail["comparison"]["rows"] == written["rows"] and detail["comparison"]["baseline"] == "bm25"


def test_a_busy_model_queues_requests_instead_of_timing_them_out(base_config: Callable[..., DictConfig]) -> None:
    """One model slot, answers of ~1.5 s, an idle timeout of 0.5 s: the second stream waits its turn
    while the model is visibly working, and both complete."""
    reply = " ".join(f"w{i}" for i in range(30))
    cfg = make_config(base_config, ["serve.stream_idle_timeout_s=0.5"], {"default": reply, "token_delay_s": 0.05})
    busy = serve(cfg)
    assert busy.llm.max_concurrency == 1
    with running(create_app(busy)) as url:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda q: stream(url, "/ask/stream", {"question": q, "verify": False}), ["a", "b"]))
    for events in results:
        assert events[-1][0] == "done" and events[-1][1]["answer"].startswith("w0 w1")
    first_tokens = sorted(e[-1][1]["latency"]["first_token_ms"] for e in results)
    assert first_tokens[1] > 1000  # the second one waited for the first to finish
