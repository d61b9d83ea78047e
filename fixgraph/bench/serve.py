"""Load on the served system: SSE answer streams under concurrency, and the HTTP cost of /search.

Starts `fixgraph serve` as its own process (the real CLI, uvicorn, a real socket) on the composed
config, then measures, in order:
1. /search vs the benchmark's own `System.search`: the same system is opened in this process with
   `open_system` (as the benchmark opens it) and each split question is timed both ways, interleaved,
   so both see the same machine state. Reported: p50 of each, the server's own `search_ms`, and the
   HTTP overhead per request (client round trip minus the server's search time). Goal: < 5 ms.
2. `clients` concurrent clients, each asking /ask/stream in a loop for `seconds`: errors (HTTP
   errors, `error` events, broken streams; goal 0), time to the first event and to the first token
   (p50/p95), stream duration, completed requests per second and tokens per second.

With the fake LLM the bench gives it a fixed cited JSON answer streamed at `fake_token_delay_s` per
token and as many slots as clients, so what is measured is the service, not a model. Options:
+bench.clients=50 +bench.seconds=60 +bench.verify=false +bench.fake_token_delay_s=0.01
+bench.search_rounds=2. Against llm=qwen_coder_05b use a few clients (one llama.cpp context: requests
queue, which is what the time to first token then shows).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from omegaconf import DictConfig, OmegaConf

from fixgraph.bench import options
from fixgraph.config import systems_of
from fixgraph.evaluation.splits import build_split
from fixgraph.pipeline.stages import chunk, load_chunks, open_system

FAKE_REPLY = {
    "abstain": False,
    "sentences": [
        {"text": "Open the Network panel in Settings and select the wireless network you want.", "citations": [1]},
        {"text": "If it does not connect, check the password and turn the adapter off and on.", "citations": [2]},
        {"text": "A weak signal or a driver problem can also keep it from connecting.", "citations": [1, 3]},
    ],
}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _pct(values: list[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 2) if values else None


def _start(cfg: DictConfig, port: int, folder: Path) -> subprocess.Popen[bytes]:
    params = folder / "params.yaml"
    OmegaConf.save(cfg, params, resolve=True)
    cmd = [sys.executable, "-m", "fixgraph.cli", "serve", "--params", str(params), f"serve.port={port}"]
    cmd += ["serve.host=127.0.0.1", "serve.log_requests=false"]
    log = open(folder / "server.log", "wb")  # noqa: SIM115 (the server process owns it until it exits)
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))


def _wait_ready(base: str, proc: subprocess.Popen[bytes], folder: Path, timeout_s: float = 600) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = (folder / "server.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"fixgraph serve exited with {proc.returncode}:\n{tail}")
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"fixgraph serve did not answer /health within {timeout_s:.0f}s")


def search_latency(cfg: DictConfig, base: str, system: str, queries: list[str], rounds: int) -> dict[str, Any]:
    chunk(cfg)
    opened = open_system(cfg, system, systems_of(cfg)[system], load_chunks(cfg))
    k = int(cfg.serve.k)
    direct, http, server, overhead = [], [], [], []
    with httpx.Client(base_url=base, timeout=60) as client:
        for query in queries[:10]:  # warm-up, untimed: model load, onnx buffers, connection
            opened.search(query, k)
            client.post("/search", json={"query": query, "k": k})
        for _ in range(rounds):
            for query in queries:
                started = time.perf_counter()
                opened.search(query, k)
                direct.append(1000 * (time.perf_counter() - started))
                started = time.perf_counter()
                reply = client.post("/search", json={"query": query, "k": k})
                elapsed = 1000 * (time.perf_counter() - started)
                reply.raise_for_status()
                searched = float(reply.json()["timings"]["search_ms"])
                http.append(elapsed)
                server.append(searched)
                overhead.append(elapsed - searched)
    p50_direct, p50_http = statistics.median(direct), statistics.median(http)
    return {
        "requests": len(http),
        "k": k,
        "system_search_ms_p50": round(p50_direct, 3),
        "http_search_ms_p50": round(p50_http, 3),
        "http_search_ms_p95": _pct(http, 95),
        "server_search_ms_p50": round(statistics.median(server), 3),
        "http_overhead_ms_p50": round(statistics.median(overhead), 3),
        "http_overhead_ms_p95": _pct(overhead, 95),
        "http_minus_system_p50_ms": round(p50_http - p50_direct, 3),
        "http_vs_system_ratio": round(p50_http / p50_direct, 3) if p50_direct else None,
        "goal_overhead_ms": 5.0,
    }


async def _client(base: str, questions: list[str], offset: int, deadline: float, verify: bool) -> list[dict[str, Any]]:
    results = []
    async with httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(300.0)) as client:
        i = offset
        while time.monotonic() < deadline:
            question = questions[i % len(questions)]
            i += 1
            record: dict[str, Any] = {"ok": False, "tokens": 0}
            started = time.perf_counter()
            try:
                async with client.stream("POST", "/ask/stream", json={"question": question, "verify": verify}) as r:
                    if r.status_code != 200:
                        record["error"] = f"HTTP {r.status_code}"
                    else:
                        event = ""
                        async for line in r.aiter_lines():
                            if line.startswith("event:"):
                                event = line[6:].strip()
                                record.setdefault("first_event_ms", 1000 * (time.perf_counter() - started))
                            elif line.startswith("data:") and event == "token":
                                record.setdefault("first_token_ms", 1000 * (time.perf_counter() - started))
                                record["tokens"] += 1
                            elif line.startswith("data:") and event == "error":
                                record["error"] = json.loads(line[5:]).get("code", "error")
                            elif line.startswith("data:") and event == "done":
                                record["ok"] = True
            except httpx.HTTPError as exc:
                record["error"] = type(exc).__name__
            record["total_ms"] = 1000 * (time.perf_counter() - started)
            if not record["ok"] and "error" not in record:
                record["error"] = "stream ended without done"
            record["finished"] = time.monotonic()
            results.append(record)
    return results


def sse_load(base: str, questions: list[str], clients: int, seconds: float, verify: bool) -> dict[str, Any]:
    async def main() -> list[dict[str, Any]]:
        deadline = time.monotonic() + seconds
        batches = await asyncio.gather(*(_client(base, questions, c, deadline, verify) for c in range(clients)))
        return [r for batch in batches for r in batch]

    started = time.monotonic()
    results = asyncio.run(main())
    wall = time.monotonic() - started
    ok = [r for r in results if r["ok"]]
    errors: dict[str, int] = {}
    for r in results:
        if "error" in r:
            errors[r["error"]] = errors.get(r["error"], 0) + 1
    first_event = [r["first_event_ms"] for r in results if "first_event_ms" in r]
    first_token = [r["first_token_ms"] for r in ok if "first_token_ms" in r]
    totals = [r["total_ms"] for r in ok]
    return {
        "clients": clients,
        "seconds": seconds,
        "wall_s": round(wall, 1),
        "requests": len(results),
        "completed": len(ok),
        "errors": sum(errors.values()),
        "error_kinds": errors,
        "requests_per_s": round(len(ok) / wall, 2),
        "tokens_per_s": round(sum(r["tokens"] for r in ok) / wall, 1),
        "first_event_ms_p50": _pct(first_event, 50),
        "first_event_ms_p95": _pct(first_event, 95),
        "first_token_ms_p50": _pct(first_token, 50),
        "first_token_ms_p95": _pct(first_token, 95),
        "stream_ms_p50": _pct(totals, 50),
        "stream_ms_p95": _pct(totals, 95),
    }


def run(cfg: DictConfig) -> dict[str, Any]:
    bench = options(cfg)
    clients = int(bench.get("clients", 50))
    seconds = float(bench.get("seconds", 60))
    verify = bool(bench.get("verify", False))
    rounds = int(bench.get("search_rounds", 2))
    resolved = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))  # a copy this bench may change
    assert isinstance(resolved, DictConfig)
    cfg = resolved
    if str(cfg.llm.kind) == "fake" and not cfg.llm.get("responses"):
        cfg.llm.default = FAKE_REPLY
        cfg.llm.token_delay_s = float(bench.get("fake_token_delay_s", 0.01))
        cfg.llm.max_concurrency = clients  # the fake is thread-safe: measure the service, not one slot
    cfg.serve.max_streams = max(int(cfg.serve.max_streams), clients)
    if cfg.llm.get("cache") is not None:
        cfg.llm.cache.enabled = False  # measure generation, not the answer cache
    questions = [q.question for q in build_split(cfg.split).load()]
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="fixgraph-bench-serve-") as tmp:
        folder = Path(tmp)
        proc = _start(cfg, port, folder)
        try:
            _wait_ready(base, proc, folder)
            served = httpx.get(f"{base}/config", timeout=30).json()
            system = str(served["system"])
            search = search_latency(cfg, base, system, questions, rounds)
            # untimed: the first answer loads the model (llama.cpp maps the GGUF on first use)
            httpx.post(f"{base}/ask", json={"question": questions[-1], "verify": False}, timeout=900)
            load = sse_load(base, questions, clients, seconds, verify)
            streams = httpx.get(f"{base}/health", timeout=30).json()["streams"]
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    return {
        "corpus": str(cfg.corpus.name),
        "system": system,
        "llm": str(cfg.llm.name),
        "questions": len(questions),
        "verify": verify,
        "search": search,
        "sse": load,
        "server_stream_counters": streams,
    }
