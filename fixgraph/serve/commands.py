"""Verbs of the serving layer (the command table, fixgraph/commands.py): `serve` (the API and the
dashboard) and `diagnose` (one log, or a question file of logs)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from fixgraph.commands import Command
from fixgraph.config import ConfigError

log = logging.getLogger(__name__)


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", metavar="RUN_ID", help="serve the system(s) an MLflow evaluation run recorded")
    parser.add_argument("--study", help="serve a finalist of a locked-test study (experiments/<study>/)")
    parser.add_argument("--finalist", help="with --study: the finalist (or baseline) to serve")
    parser.add_argument(
        "--allow-remote", action="store_true", help="allow serve.host other than loopback (needs an API key)"
    )


def served_config(args: argparse.Namespace, cfg: DictConfig) -> Any:
    from fixgraph.serve import source

    if args.run and args.study:
        raise ConfigError("serve either --run RUN_ID or --study S --finalist NAME, not both")
    if bool(args.study) != bool(args.finalist):
        raise ConfigError("--study and --finalist go together: --study S --finalist NAME")
    if args.run:
        return source.from_run(cfg, args.run)
    if args.study:
        return source.from_study(cfg, args.study, args.finalist)
    return source.composed(cfg)


def serve_command(args: argparse.Namespace, cfg: DictConfig) -> int:
    import uvicorn

    from fixgraph.serve.app import create_app
    from fixgraph.serve.service import Service
    from fixgraph.serve.settings import build_settings, check_binding

    settings = build_settings(cfg.serve)
    check_binding(settings, args.allow_remote)  # before loading anything: a refused binding costs nothing
    served = served_config(args, cfg)
    service = Service(served, settings)
    app = create_app(service)
    log.info(
        "serving system %s (%s, %s) with answerer %s and llm %s on http://%s:%d/ (API docs: /docs)%s",
        served.system,
        served.cfg.corpus.name,
        served.origin.get("kind"),
        served.cfg.answer.name,
        served.cfg.llm.name,
        settings.host,
        settings.port,
        "; API key required" if settings.api_key() else "",
    )
    uvicorn.run(app, host=settings.host, port=settings.port, access_log=False, log_config=None)
    return 0


def _diagnose_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--log", type=Path, help="a log file (`-` reads standard input)")
    parser.add_argument("--questions", type=Path, help="a question file of logs (qtype: log) to score")
    parser.add_argument("--system", help="system to diagnose with (default: the served one)")


def diagnose_command(args: argparse.Namespace, cfg: DictConfig) -> int:
    if bool(args.log) == bool(args.questions):
        raise ConfigError("diagnose needs exactly one of --log FILE and --questions FILE")
    if args.questions:
        from fixgraph.serve.logeval import evaluate_logs

        result = evaluate_logs(cfg, args.questions, args.system)
        print(result["table"])
        print(f"outputs: {result['output']}")
        return 0
    from fixgraph.serve.logeval import open_diagnoser

    text = sys.stdin.read() if str(args.log) == "-" else args.log.read_text(encoding="utf-8", errors="replace")
    name, diagnoser, search = open_diagnoser(cfg, args.system)
    diagnosis = diagnoser.diagnose(text, search)
    print(json.dumps({"system": name, **diagnosis.as_dict(top=10)}, indent=2, ensure_ascii=False))
    return 0


COMMANDS = [
    Command(
        "serve",
        "serve a system over HTTP: API (/docs), SSE streams and the dashboard (/)",
        serve_command,
        _serve_arguments,
    ),
    Command(
        "diagnose",
        "diagnose an error log, or score diagnosis on a question file of logs",
        diagnose_command,
        _diagnose_arguments,
    ),
]
