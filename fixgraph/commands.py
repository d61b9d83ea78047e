"""The command table: every `fixgraph` verb is a `Command`, declared next to the code it runs.

Each package that owns verbs lists them in its `commands.py` (`COMMANDS`); fixgraph/cli.py collects the
lists, builds the parser from them and dispatches to `Command.run(args, cfg)`. A verb that composes a
config gets `--params FILE` and Hydra overrides, accepted anywhere on its command line.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Handler = Callable[[argparse.Namespace, Any], int]


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    del parser


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    run: Handler  # (parsed arguments, composed config or None) -> exit status
    arguments: Callable[[argparse.ArgumentParser], None] = _no_arguments
    config: bool = True  # compose a config (from --params or conf/ + overrides) before `run`
    overrides: bool = True  # takes Hydra overrides (anywhere on its command line)
    # words of the override slot that are not Hydra overrides (run ids, sweep expressions) are taken
    # out of `args.overrides` here, before the config is composed
    take_words: Callable[[argparse.Namespace], None] | None = None


def csv(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]
