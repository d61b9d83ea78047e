"""`fixgraph` command line: builds the parser from the command table and dispatches, nothing more.

Every verb is a `fixgraph.commands.Command` declared by the package that owns it. Hydra overrides
(`retriever=bm25 systems.bm25.k1=1.2`) are accepted anywhere on a verb's command line, before or after
its flags; with `--params params.yaml` (how DVC stages call us) the config is read from that file.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from fixgraph.commands import Command

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

# Pin the CPU math of torch (MKL, oneDNN, ATen kernels) and numpy (its SIMD loops, OpenBLAS) to code
# paths every x86-64-v2 CPU has. Left to pick by CPU, embeddings and graph node vectors differ in their
# last bits between machines (AVX-512 vs AVX2), so a fresh clone on other hardware rewrote dvc.lock and
# could flip near-threshold entity merges. Costs about 3x on uncached document embedding here (MiniLM,
# 612 chunks: 14 s -> 43 s); query embedding goes through onnxruntime, which these do not touch. numpy's
# names are those of the pinned numpy 2.x (its dispatch targets above the X86_V2 baseline). Set any of
# them in the environment to choose otherwise.
PORTABLE_MATH_ENV = {
    "MKL_CBWR": "COMPATIBLE",
    "ONEDNN_MAX_CPU_ISA": "SSE41",
    "ATEN_CPU_CAPABILITY": "default",
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    "OPENBLAS_CORETYPE": "Nehalem",
}


def commands() -> dict[str, Command]:
    from fixgraph.answer.commands import COMMANDS as ANSWER
    from fixgraph.bench.commands import COMMANDS as BENCH
    from fixgraph.experiment.commands import COMMANDS as EXPERIMENT
    from fixgraph.llm.commands import COMMANDS as LLM
    from fixgraph.pipeline.commands import COMMANDS as PIPELINE
    from fixgraph.serve.commands import COMMANDS as SERVE
    from fixgraph.training.commands import COMMANDS as TRAINING

    table = [*PIPELINE, *EXPERIMENT, *ANSWER, *TRAINING, *LLM, *BENCH, *SERVE]
    names = [c.name for c in table]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise RuntimeError(f"commands declared twice: {sorted(duplicates)}")
    return {c.name: c for c in table}


def parser(table: dict[str, Command]) -> argparse.ArgumentParser:
    main = argparse.ArgumentParser(prog="fixgraph", description=__doc__.splitlines()[0])
    main.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = main.add_subparsers(dest="command", required=True)
    for command in table.values():
        verb = sub.add_parser(command.name, help=command.help, description=command.help)
        if command.config:
            verb.add_argument("--params", type=Path, help="read the resolved config from this file (DVC stages)")
        command.arguments(verb)
        if command.overrides:
            verb.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. retriever=bm25")
    return main


def parse(argv: Sequence[str] | None, table: dict[str, Command]) -> argparse.Namespace:
    """Parse, then move override words argparse left over (after a flag) into `args.overrides`."""
    cli = parser(table)
    args, extras = cli.parse_known_args(argv)
    command = table[args.command]
    flags = [e for e in extras if e.startswith("-")]
    if flags or (extras and not command.overrides):
        cli.error(f"unrecognized arguments: {' '.join(flags or extras)}")
    if command.overrides:
        args.overrides = [*args.overrides, *extras]
    else:
        args.overrides = []
    return args


def dispatch(args: argparse.Namespace, command: Command) -> int:
    from fixgraph.config import load_config
    from fixgraph.schema import validate

    if command.take_words is not None:
        command.take_words(args)
    cfg = None
    if command.config:
        cfg = load_config(args.params, args.overrides)
        validate(cfg)
    return command.run(args, cfg)


def main(argv: Sequence[str] | None = None) -> int:
    # before anything imports torch: the math libraries read these once, when they load
    for key, value in {**OFFLINE_ENV, **PORTABLE_MATH_ENV}.items():
        os.environ.setdefault(key, value)
    table = commands()
    args = parse(argv, table)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("httpx", "urllib3", "alembic", "sentence_transformers", "mlflow", "bm25s"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("bitsandbytes").setLevel(logging.ERROR)  # warns on import that a hub kernel is unreachable
    from fixgraph.errors import USER_ERRORS

    try:
        return dispatch(args, table[args.command])
    except USER_ERRORS as exc:
        print(f"fixgraph {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
