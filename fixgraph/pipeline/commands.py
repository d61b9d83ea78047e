"""Verbs of the data layer: config, params, fetch, ingest, chunk, graph, graph-export, index, candidates."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fixgraph.commands import Command
from fixgraph.evaluation.cli_flags import add_question_flags, question_flag_words


def _config(args: argparse.Namespace, cfg: Any) -> int:
    from omegaconf import OmegaConf

    print(OmegaConf.to_yaml(cfg))
    return 0


def _params(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.config import write_params

    write_params(args.output, args.overrides)
    print(f"wrote {args.output}")
    return 0


def _fetch(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.pipeline import stages

    info = stages.fetch(cfg)
    print(f"{cfg.corpus.name}: {info.get('package', '')} {info.get('version', '')} from {info['origin']}")
    return 0


def _ingest(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.pipeline import stages

    print(stages.ingest(cfg).info)
    return 0


def _chunk(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.pipeline import stages

    print(stages.chunk(cfg).info)
    return 0


def _graph(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.pipeline import graph

    print(graph.build(cfg, track=False if args.no_track else None).info)
    return 0


def _graph_export(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.pipeline.graph import export_graph

    print(export_graph(cfg, args.format, args.out))
    return 0


def _index(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.config import systems_of
    from fixgraph.pipeline import stages

    systems = systems_of(cfg)
    if args.system is not None and args.system not in systems:
        raise KeyError(f"unknown system {args.system!r}; configured systems: {', '.join(systems)}")
    stages.chunk(cfg)
    chunks = stages.load_chunks(cfg)
    for name, system_cfg in systems.items():
        if args.system in (None, name):
            print(stages.index(cfg, name, system_cfg, chunks, stage_output=True).info)
    return 0


def _expand(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.pipeline.expansion import expand

    print(expand(cfg).info)
    return 0


def _candidates(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.pipeline.candidates import CandidateStore, record_candidates

    for name, stats in record_candidates(cfg).items():
        print(f"{name}: {stats.hits} recorded values reused, {stats.misses} computed and recorded")
    print(f"candidate cache: {CandidateStore.of(cfg).path}")
    return 0


def _params_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", type=Path, default=Path("params.yaml"))


def _graph_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-track", action="store_true", help="do not record the build in MLflow")


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=["csv", "cypher"], default="csv")
    parser.add_argument("--out", type=Path, required=True, help="folder (csv) or file (cypher)")


def _index_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--system", help="system name (a key of `systems`)")


COMMANDS = [
    Command("config", "print the composed, resolved config (and check it: unknown keys are errors)", _config),
    Command(
        "params",
        "write the composed config as params.yaml (what DVC stages read)",
        _params,
        _params_arguments,
        config=False,
    ),
    Command("fetch", "obtain the raw corpus snapshot into the data folder", _fetch),
    Command("ingest", "parse the corpus snapshot into documents + manifest", _ingest),
    Command("chunk", "chunk the documents along their structure", _chunk),
    Command(
        "graph", "build the knowledge graph (extractor=structural|llm) and its quality report", _graph, _graph_arguments
    ),
    Command(
        "graph-export",
        "export the built graph for Neo4j (neo4j-admin CSV or a Cypher script)",
        _graph_export,
        _export_arguments,
    ),
    Command("index", "build the index of one system (default: every configured system)", _index, _index_arguments),
    Command("expand", "document expansion: LLM-generated questions per chunk (journaled, cached)", _expand),
    Command(
        "candidates",
        "record every configured system's rankings and scores in the candidate cache",
        _candidates,
        add_question_flags,
        take_words=question_flag_words,
    ),
]
