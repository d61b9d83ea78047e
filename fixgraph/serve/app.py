"""The FastAPI app: endpoints over one `Service`, the dashboard, and the guards around them.

Blocking work (search, diagnosis, graph lookups) runs in handlers declared `def`, which FastAPI runs
on its thread pool; streams run on threads of their own (`streams.py`). OpenAPI docs: /docs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request

from fixgraph import __version__
from fixgraph.serve.answering import ask_events, diagnose_events
from fixgraph.serve.middleware import Guard, RequestLog
from fixgraph.serve.schemas import (
    AskRequest,
    AskResponse,
    CompareRequest,
    DiagnoseRequest,
    EvidenceRequest,
    SearchRequest,
    SearchResponse,
)
from fixgraph.serve.service import Service
from fixgraph.serve.settings import ServeSettings
from fixgraph.serve.streams import Produce, StreamGuard, run_events, sse_stream

STATIC = Path(__file__).resolve().parent / "static"
ERROR_STATUS = {"llm_unavailable": 503, "llm_error": 502, "llm_garbage": 502, "timeout": 504, "not_found": 404}
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def create_app(service: Service, settings: ServeSettings | None = None) -> FastAPI:
    """The app over `service`; `settings` replaces the service's own (tests run one service behind
    several guards)."""
    settings = settings or service.settings
    app = FastAPI(
        title="fixgraph",
        version=__version__,
        description="Grounded answers, search and log diagnosis over the benchmarked system "
        f"`{service.default_system}` ({service.cfg.corpus.name}). Streams are Server-Sent Events: "
        "`meta`, `progress`, `token`, `citation`, `done`, `error`.",
    )
    guard = StreamGuard(settings.max_streams, service.count)

    def alive() -> float:  # when the model last did something (a busy model is not a stalled one)
        return float(getattr(service.llm, "last_activity", 0.0))

    app.state.service = service

    def limit_k(k: int | None) -> int:
        k = k or settings.k
        if k > settings.max_k:
            raise HTTPException(422, f"k={k} exceeds the limit {settings.max_k} (serve.max_k)")
        return k

    def limit_text(name: str, value: str, limit: int, unit: str, setting: str) -> None:
        size = len(value.encode()) if unit == "bytes" else len(value)
        if size > limit:
            raise HTTPException(413, f"{name} is {size} {unit}; the limit is {limit} (serve.{setting})")

    def check_system(name: str | None) -> str:
        name = name or service.default_system
        if name not in service.system_configs:
            raise HTTPException(404, f"unknown system {name!r}; configured: {', '.join(service.system_configs)}")
        return name

    def stream(produce: Produce, label: str) -> StreamingResponse:
        if not guard.acquire():
            raise HTTPException(503, f"too many concurrent streams (serve.max_streams={settings.max_streams})")
        body = sse_stream(produce, settings.stream_idle_timeout_s, label, guard, alive)
        return StreamingResponse(body, media_type="text/event-stream", headers=SSE_HEADERS)

    async def collect(produce: Produce, label: str) -> dict[str, Any]:
        """A stream's `done` payload, for the non-streaming endpoints; an `error` event becomes a 5xx."""
        if not guard.acquire():
            raise HTTPException(503, f"too many concurrent requests (serve.max_streams={settings.max_streams})")
        outcome = "cancelled"
        try:
            async for event, data in run_events(produce, settings.stream_idle_timeout_s, label, alive):
                if event == "error":
                    outcome = "failed"
                    raise HTTPException(ERROR_STATUS.get(data["code"], 500), f"{data['code']}: {data['message']}")
                if event == "done":
                    outcome = "completed"
                    return data
            raise HTTPException(500, "the answer ended without a result")
        finally:
            guard.release(outcome)

    @app.exception_handler(KeyError)
    async def not_found(_: Request, exc: KeyError) -> JSONResponse:
        return JSONResponse({"detail": str(exc.args[0]) if exc.args else "not found"}, status_code=404)

    @app.get("/", include_in_schema=False)
    def dashboard() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/favicon.ico", include_in_schema=False)
    def favicon() -> Response:
        return Response(status_code=204)

    @app.get("/health", summary="liveness, what is loaded, stream counters")
    def health() -> dict[str, Any]:
        return service.health()

    @app.get("/config", summary="what is served: system, origin (run / study with dev and test figures), config")
    def config() -> dict[str, Any]:
        return service.describe()

    @app.get("/systems", summary="the configured systems and the served one")
    def systems() -> dict[str, Any]:
        return {"default": service.default_system, "systems": list(service.system_configs)}

    @app.post("/search", response_model=SearchResponse, summary="ranked chunks with offsets, scores, timings")
    def search(body: SearchRequest) -> dict[str, Any]:
        limit_text("query", body.query, settings.max_question_chars, "characters", "max_question_chars")
        return service.search(body.query, limit_k(body.k), check_system(body.system))

    def ask_producer(body: AskRequest) -> Produce:
        limit_text("question", body.question, settings.max_question_chars, "characters", "max_question_chars")
        name, k = check_system(body.system), limit_k(body.k)
        verify = settings.verify if body.verify is None else body.verify
        return lambda cancel: ask_events(service, body.question, name, k, verify, cancel)

    @app.post(
        "/ask", response_model=AskResponse, summary="a grounded answer with per-sentence citations (chunk + span)"
    )
    async def ask(body: AskRequest) -> dict[str, Any]:
        return await collect(ask_producer(body), "ask")

    @app.post("/ask/stream", summary="the same as Server-Sent Events: meta, progress, token, citation, done, error")
    def ask_stream(body: AskRequest) -> StreamingResponse:
        return stream(ask_producer(body), "ask")

    def diagnose_producer(body: DiagnoseRequest, explain: bool) -> Produce:
        limit_text("log", body.log, settings.max_log_bytes, "bytes", "max_log_bytes")
        name = check_system(body.system)
        verify = settings.verify if body.verify is None else body.verify
        return lambda cancel: diagnose_events(service, body.log, name, explain, verify, cancel)

    @app.post("/diagnose", summary="error log -> signatures, linked entities, ranked causes and fixes")
    async def diagnose(body: DiagnoseRequest) -> dict[str, Any]:
        return await collect(diagnose_producer(body, body.explain), "diagnose")

    @app.post("/diagnose/stream", summary="the diagnosis (meta), then the model's cited explanation as it streams")
    def diagnose_stream(body: DiagnoseRequest) -> StreamingResponse:
        return stream(diagnose_producer(body, True), "diagnose")

    @app.get("/documents/{doc_id}", summary="a document's text, sections and chunk offsets")
    def document(doc_id: str) -> dict[str, Any]:
        return _found(service.document(doc_id), f"no document {doc_id!r}")

    @app.get("/graph/{node_id:path}", summary="a knowledge-graph node's neighbourhood, with provenance spans")
    def graph_node(node_id: str, limit: int = 50) -> dict[str, Any]:
        graph = _found(service.graph, "no knowledge graph for this corpus: build it with `fixgraph graph`")
        return _found(graph.neighbourhood(node_id, min(limit, 200)), f"no graph node {node_id!r}")

    @app.post("/graph/evidence", summary="the subgraph stated in a set of chunks (an answer's evidence)")
    def graph_evidence(body: EvidenceRequest) -> dict[str, Any]:
        graph = _found(service.graph, "no knowledge graph for this corpus: build it with `fixgraph graph`")
        return graph.evidence(body.chunk_ids)

    @app.get("/questions", summary="questions of the served split (never the locked test part)")
    def questions() -> list[dict[str, Any]]:
        return [{"qid": q.qid, "question": q.question, "qtype": q.qtype} for q in service.questions()]

    @app.post("/compare", summary="two or more systems side by side on one question, with where its gold lies")
    def compare(body: CompareRequest) -> dict[str, Any]:
        if not body.question and not body.qid:
            raise HTTPException(422, "give `question` or `qid`")
        for name in body.systems:
            check_system(name)
        text = body.question or ""
        limit_text("question", text, settings.max_question_chars, "characters", "max_question_chars")
        return service.compare(text, body.systems, limit_k(body.k), body.qid)

    @app.get("/runs", summary="evaluation runs of the MLflow store, newest first")
    def runs(limit: int = 50) -> list[dict[str, Any]]:
        from fixgraph.serve.runs import list_runs

        return list_runs(service.cfg, settings.mlflow_ui, min(limit, 200))

    @app.get("/runs/{run_id}", summary="one evaluation: metrics with CIs per system, paired comparison")
    def run(run_id: str) -> dict[str, Any]:
        from fixgraph.serve.runs import run_detail

        return run_detail(service.cfg, settings.mlflow_ui, run_id)

    # the last added runs first: log every request, including those the guard refuses
    app.add_middleware(
        Guard, api_key=settings.api_key(), max_body_bytes=settings.max_body_bytes, key_env=settings.api_key_env
    )
    if settings.log_requests:
        app.add_middleware(RequestLog)
    return app


def _found(value: Any, message: str) -> Any:
    if value is None:
        raise HTTPException(404, message)
    return value
