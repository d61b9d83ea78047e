"""CLI verbs of the training layer: corpus-qa, train-data, train, linkpred (the older reranker-data /
train-reranker in cli.py are train-data / train of the global `trainer`).

Registered by fixgraph/cli.py (two lines there), like experiment/commands.py.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig

COMMANDS = ("corpus-qa", "train-data", "train", "linkpred")


def add_commands(sub: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    command("corpus-qa", "generate grounded question/answer pairs per chunk with training.corpus_qa.llm")
    for verb, text in (
        ("train-data", "build a trainer's training data (a datasets.DatasetDict) from the corpus"),
        ("train", "train a model with lightning (trainer=..., or --trainer NAME of training.trainers)"),
    ):
        p = command(verb, text)
        p.add_argument("--trainer", dest="trainer_name", help="a name of training.trainers (default: `trainer`)")
    command("linkpred", "GNN link prediction vs heuristics on held-out graph edges; the predicted-links layer")


def dispatch(args: argparse.Namespace, cfg: DictConfig) -> int:
    from fixgraph.training import stages

    if args.command == "corpus-qa":
        result = stages.corpus_qa(cfg)
    elif args.command == "linkpred":
        from fixgraph.training.linkpred_eval import linkpred

        result = linkpred(cfg)
    elif args.command == "train-data":
        result = stages.training_data(cfg, args.trainer_name)
    else:
        result = stages.train(cfg, args.trainer_name)
    print(json.dumps({"stage": result.stage, "status": result.status, "output": str(result.output), **result.info}))
    return 0
