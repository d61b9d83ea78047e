"""Verbs of the training track: reranker-data, train-reranker."""

from __future__ import annotations

import argparse
from typing import Any

from fixgraph.commands import Command


def _reranker_data(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.training.stages import reranker_data

    print(reranker_data(cfg).info)
    return 0


def _train_reranker(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.training.stages import train_reranker

    print(train_reranker(cfg).info)
    return 0


COMMANDS = [
    Command(
        "reranker-data", "derive cross-encoder training groups from the corpus (never from questions)", _reranker_data
    ),
    Command("train-reranker", "fine-tune the cross-encoder reranker on the corpus-derived groups", _train_reranker),
]
