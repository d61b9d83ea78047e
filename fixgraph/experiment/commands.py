"""CLI verbs of the evaluation protocol: split, finalists, test, sweep, compare, expected.

Registered by fixgraph/cli.py (two lines there); each verb parses its flags here and calls a library
function, nothing more.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

COMMANDS = ("split", "finalists", "test", "sweep", "compare", "expected")


def add_commands(sub: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    """`command(name, help)` is cli.py's factory (it adds --params and Hydra overrides); `sub` its subparsers."""
    split = command("split", "freeze the dev/test split of the question pool, or verify the frozen one")
    split.add_argument("--refreeze", metavar="REASON", help="rewrite a frozen split (the reason is recorded)")

    finalists = command("finalists", "score finalists and baseline on dev and record them for the locked test")
    finalists.add_argument("--study", required=True, help="study name: experiments/<study>/")
    finalists.add_argument("--finalists", required=True, help="comma-separated system names")
    finalists.add_argument("--baseline", help="default: experiment.baseline")
    finalists.add_argument("--family-metrics", help="comma-separated; default: comparison.family_metrics")
    finalists.add_argument("--replace", action="store_true", help="choose again (only before any test run)")
    finalists.add_argument("--no-track", action="store_true")

    test = command("test", "score the recorded finalists once on the locked test split")
    test.add_argument("--study", required=True)
    test.add_argument("--force-reason", help="required for any test run after the first; recorded")
    test.add_argument("--no-track", action="store_true")

    sweep = command("sweep", "Optuna sweep over a search space (conf/sweep/*.yaml) on the dev split")
    sweep.add_argument("--study", help="Optuna study name (default: the sweep option's name); resumable")
    sweep.add_argument("--trials", type=int, help="total completed trials wanted (default: sweep.n_trials)")
    sweep.add_argument("--sampler", choices=("tpe", "grid", "random"), help="default: sweep.sampler")
    sweep.add_argument("--storage", help="Optuna storage URL (sqlite:///..., postgresql://...)")
    sweep.add_argument("--workers", type=int, default=1, help="worker processes on this machine")
    sweep.add_argument("--join", action="store_true", help="join an existing study as one more worker")
    sweep.add_argument("--no-fast-path", action="store_true", help="always run the full evaluation per trial")

    # positional words without '=' are MLflow run ids (evaluation or system runs), the rest Hydra overrides
    compare = command("compare", "paired comparison of MLflow runs: RUN_ID... and/or --tag key=value")
    compare.add_argument("--tag", action="append", default=[], help="select system runs by tag (repeatable)")
    compare.add_argument("--baseline", help="baseline system label (default: the first)")
    compare.add_argument("--metrics", help="comma-separated (default: the headline metrics)")
    compare.add_argument("--axis", help="the axis under test: corpus, chunks, retriever, reranker")
    compare.add_argument("--output", type=Path, help="folder for the table and plots (default: a temp folder)")
    compare.add_argument("--no-track", action="store_true")

    expected = sub.add_parser("expected", help="check (or record) expected-score files")
    expected.add_argument("action", choices=("check", "record"))
    expected.add_argument("files", nargs="+", type=Path)


def split_overrides(args: argparse.Namespace) -> None:
    """`compare` shares argparse's positional slot between run ids and Hydra overrides."""
    if args.command == "expected":
        args.params, args.overrides = None, []
    if args.command == "compare":
        args.runs = [r for r in args.overrides if "=" not in r]
        args.overrides = [o for o in args.overrides if "=" in o]


def dispatch(args: argparse.Namespace, cfg: DictConfig) -> int:
    if args.command == "split":
        return _split(cfg, args.refreeze)
    if args.command == "finalists":
        from fixgraph.experiment.locked import record_finalists

        path, _ = record_finalists(
            cfg,
            args.study,
            _csv(args.finalists),
            args.baseline,
            _csv(args.family_metrics) or None,
            args.replace,
            track=False if args.no_track else None,
        )
        print((path.parent / "dev_evidence.md").read_text())
        print(f"recorded {path}; score the test split once with `fixgraph test --study {args.study}`")
        return 0
    if args.command == "test":
        from fixgraph.experiment.locked import run_test

        report, result = run_test(cfg, args.study, args.force_reason, track=False if args.no_track else None)
        print(report.read_text())
        print(f"report: {report} (+ .json); evaluation: {result.output_dir}")
        return 0
    if args.command == "sweep":
        from fixgraph.experiment.sweep import run_sweep

        summary = run_sweep(
            cfg,
            study=args.study,
            trials=args.trials,
            sampler=args.sampler,
            storage=args.storage,
            workers=args.workers,
            join=args.join,
            fast_path=not args.no_fast_path,
        )
        print(summary.describe())
        return 0
    if args.command == "compare":
        from fixgraph.experiment.compare_runs import compare_runs

        outcome = compare_runs(
            cfg,
            args.runs,
            args.tag,
            baseline=args.baseline,
            metrics=_csv(args.metrics) or None,
            axis=args.axis,
            output=args.output,
            track=not args.no_track,
        )
        print(outcome)
        return 0
    if args.command == "expected":
        return _expected(args.action, args.files)
    raise KeyError(f"unknown command {args.command!r}")


def _csv(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def _split(cfg: DictConfig, refreeze: str | None) -> int:
    from fixgraph.evaluation.splitting import freeze

    s = cfg.splitting
    split, status = freeze(Path(str(s.pool)), Path(str(s.file)), float(s.test_fraction), str(s.salt), refreeze)
    counts = split.counts()
    print(f"{s.file}: {status}; digest {split.digest[:16]}")
    for part in ("dev", "test"):
        total = sum(counts[part].values())
        print(f"  {part}: {total} questions ({', '.join(f'{t} {n}' for t, n in counts[part].items())})")
    return 0


def _expected(action: str, files: list[Path]) -> int:
    from fixgraph.experiment import expected

    failed = 0
    for path in files:
        if action == "record":
            values = expected.record(path)
            print(f"{path}: recorded {sum(len(v) for v in values.values())} scores")
            continue
        mismatches = expected.check(path)
        if mismatches:
            failed += 1
            print(f"{path}: FAILED")
            for mismatch in mismatches:
                print(f"  {mismatch}")
        else:
            print(f"{path}: ok")
    return 1 if failed else 0
