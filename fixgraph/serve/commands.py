"""CLI verbs of the serving layer: `serve` (the API and dashboard) and `diagnose` (a log, or a question
file of logs). Registered by fixgraph/cli.py through `add_commands` / `dispatch`, like the other layers.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.config import ConfigError

COMMANDS = ("serve", "diagnose")
log = logging.getLogger(__name__)


def add_commands(sub: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    serve = command("serve", "serve a system over HTTP: API (/docs), SSE streams and the dashboard (/)")
    serve.add_argument("--run", metavar="RUN_ID", help="serve the configuration an MLflow run recorded")
    serve.add_argument("--study", help="serve a finalist of a locked-test study (experiments/<study>/)")
    serve.add_argument("--finalist", help="with --study: the finalist (or baseline) to serve")
    serve.add_argument(
        "--allow-remote", action="store_true", help="allow serve.host other than loopback (needs an API key)"
    )

    diagnose = command("diagnose", "diagnose an error log, or score diagnosis on a question file of logs")
    diagnose.add_argument("--log", type=Path, help="a log file (`-` reads standard input)")
    diagnose.add_argument("--questions", type=Path, help="a question file of logs (qtype: log) to score")
    diagnose.add_argument("--system", help="system to diagnose with (default: the served one)")


def served_config(args: argparse.Namespace, cfg: DictConfig) -> Any:
    from fixgraph.serve import source

    if args.run and args.study:
        raise ConfigError("serve either --run RUN_ID or --study S --finalist NAME, not both")
    if bool(args.study) != bool(args.finalist):
        raise ConfigError("--study and --finalist go together: --study S --finalist NAME")
    if args.run:
        return source.from_run(cfg, args.run, args.overrides)
    if args.study:
        return source.from_study(cfg, args.study, args.finalist, args.overrides)
    return source.composed(cfg)


def serve_command(args: argparse.Namespace, cfg: DictConfig) -> int:
    import uvicorn

    from fixgraph.serve.app import create_app
    from fixgraph.serve.service import Service
    from fixgraph.serve.settings import build_settings, check_binding

    served = served_config(args, cfg)
    settings = build_settings(served.cfg.serve)
    check_binding(settings, args.allow_remote)  # before loading anything: a refused binding costs nothing
    service = Service(served, settings)
    app = create_app(service)
    origin = served.origin.get("kind")
    log.info(
        "serving system %s (%s, %s) with answerer %s and llm %s on http://%s:%d/ (API docs: /docs)%s",
        served.system,
        served.cfg.corpus.name,
        origin,
        served.cfg.answer.name,
        served.cfg.llm.name,
        settings.host,
        settings.port,
        "; API key required" if settings.api_key() else "",
    )
    uvicorn.run(app, host=settings.host, port=settings.port, access_log=False, log_config=None)
    return 0


def diagnose_command(args: argparse.Namespace, cfg: DictConfig) -> int:
    if bool(args.log) == bool(args.questions):
        raise ConfigError("diagnose needs exactly one of --log FILE and --questions FILE")
    if args.questions:
        from fixgraph.serve.logeval import evaluate_logs

        result = evaluate_logs(cfg, args.questions, args.system)
        print(result["table"])
        print(f"outputs: {result['output']}")
        return 0
    import sys

    from fixgraph.config import systems_of
    from fixgraph.pipeline.graph import graph_dir
    from fixgraph.pipeline.stages import chunk, load_chunks, load_documents, open_system
    from fixgraph.serve.diagnose import Diagnoser
    from fixgraph.serve.graphview import GraphView
    from fixgraph.serve.source import default_system

    text = sys.stdin.read() if str(args.log) == "-" else args.log.read_text(encoding="utf-8", errors="replace")
    name = default_system(cfg, args.system or cfg.serve.get("system"))
    chunk(cfg)
    chunks = load_chunks(cfg)
    system = open_system(cfg, name, systems_of(cfg)[name], chunks)
    folder = graph_dir(cfg)
    graph = GraphView.load(folder) if (folder / "nodes.parquet").exists() else None
    diagnoser = Diagnoser({d.id: d for d in load_documents(cfg)}, chunks, graph)
    diagnosis = diagnoser.diagnose(text, lambda q, k: (system.search(q, k), dict(system.last_timings)))
    print(json.dumps({"system": name, **diagnosis.as_dict(top=10)}, indent=2, ensure_ascii=False))
    return 0


def dispatch(args: argparse.Namespace, cfg: DictConfig) -> int:
    if args.command == "serve":
        return serve_command(args, cfg)
    return diagnose_command(args, cfg)
