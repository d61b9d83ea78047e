"""`fixgraph bench NAME [overrides]`: run one benchmark and print its JSON (`fixgraph bench --list`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from fixgraph.commands import Command


def _bench_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--list", action="store_true", help="list the benchmarks")
    parser.add_argument("name", nargs="?", help="benchmark name")


def _bench_words(args: argparse.Namespace) -> None:
    """`bench NAME overrides...`: argparse may put NAME into the override slot when flags come first."""
    if args.name is not None and "=" in args.name:
        args.overrides.insert(0, args.name)
        args.name = None
    if args.name is None:
        names = [w for w in args.overrides if "=" not in w]
        if names:
            args.name = names[0]
            args.overrides.remove(names[0])


def _bench(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.bench import available, run_benchmark

    if args.list or not args.name:
        print("\n".join(available()))
        return 0
    print(json.dumps(run_benchmark(args.name, cfg, args.overrides), indent=2))
    return 0


COMMANDS = [
    Command(
        "bench",
        "run a benchmark and print its JSON (fixgraph bench --list)",
        _bench,
        _bench_arguments,
        take_words=_bench_words,
    ),
]
