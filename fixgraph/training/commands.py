"""Verbs of the training track: corpus-qa, train-data, train, linkpred (and reranker-data /
train-reranker: train-data / train of the global `trainer`, the verbs the cross-encoder had first)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from fixgraph.commands import Command


def _print(result: Any) -> int:
    print(json.dumps({"stage": result.stage, "status": result.status, "output": str(result.output), **result.info}))
    return 0


def _trainer_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trainer", dest="trainer_name", help="a name of training.trainers (default: `trainer`)")


def _corpus_qa(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.training.stages import corpus_qa

    return _print(corpus_qa(cfg))


def _train_data(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.training.stages import training_data

    return _print(training_data(cfg, getattr(args, "trainer_name", None)))


def _train(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.training.stages import train

    return _print(train(cfg, getattr(args, "trainer_name", None)))


def _linkpred(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.training.linkpred_eval import linkpred

    return _print(linkpred(cfg))


COMMANDS = [
    Command("corpus-qa", "grounded question/answer pairs per chunk from training.corpus_qa.llm", _corpus_qa),
    Command(
        "train-data",
        "build a trainer's training data (a datasets.DatasetDict) from the corpus",
        _train_data,
        _trainer_argument,
    ),
    Command(
        "train",
        "train a model with lightning (trainer=..., or --trainer NAME of training.trainers)",
        _train,
        _trainer_argument,
    ),
    Command(
        "linkpred", "GNN link prediction vs heuristics on held-out graph edges; the predicted-links layer", _linkpred
    ),
    Command("reranker-data", "train-data of the global trainer (cross-encoder groups from the corpus)", _train_data),
    Command("train-reranker", "train the global trainer (the cross-encoder reranker)", _train),
]
