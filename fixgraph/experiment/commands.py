"""Verbs of the experiment layer: run, evaluate, answers, split, sweep, fit-ltr, finalists, test, compare, expected,
ui."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path
from typing import Any

from fixgraph.commands import Command, csv
from fixgraph.evaluation.cli_flags import add_question_flags, question_flag_words


def _evaluation_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--questions", type=Path, help="any question file in the shared format")
    parser.add_argument("--name", help="name of this evaluation (default: split name or file stem)")
    parser.add_argument("--no-track", action="store_true", help="do not record the run in MLflow")
    add_question_flags(parser)


def _evaluate(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.experiment.runners import build_experiment

    if args.command == "run":
        from fixgraph.pipeline.stages import fetch

        fetch(cfg)
    runner = build_experiment(cfg.experiment)
    result = runner.run(cfg, args.questions, args.name, track=False if args.no_track else None)
    print(
        f"\n{result.name}: {result.info['questions']} questions, gold coverage {result.coverage:.1%}, "
        f"corpus {result.info['corpus']} {result.info['corpus_version']}"
    )
    print(result.table)
    if result.info.get("cost"):
        from fixgraph.evaluation.cost import cost_table

        print("What each system cost (latency: this run's wall time)\n")
        print(cost_table(result.info["cost"], result.info.get("latency", {})))
    print(f"outputs: {result.output_dir}")
    if result.mlflow_run_id:
        print(f"MLflow run {result.mlflow_run_id} (browse with `fixgraph ui`)")
    return 0


def _answers_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--questions", type=Path, help="any question file in the shared format")
    parser.add_argument("--name", help="name of this evaluation (default: split name or file stem)")
    parser.add_argument("--no-track", action="store_true", help="do not record the run in MLflow")
    parser.add_argument("--study", help="answer with a finalist of this locked-test study (with --finalist)")
    parser.add_argument("--finalist", help="the finalist's system name (experiments/<study>/finalists.yaml)")
    add_question_flags(parser)


def _answers(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.answer.commands import closing_lines
    from fixgraph.answer.run import run_answers

    if bool(args.study) != bool(args.finalist):
        raise ValueError("answers: --study and --finalist go together")
    if args.study:
        from fixgraph.experiment.studies import finalist_config

        cfg = finalist_config(cfg, args.study, args.finalist)  # exactly the system the study recorded

    result = run_answers(cfg, args.questions, args.name, track=False if args.no_track else None)
    print(f"\n{result.name}: {result.info['questions']} questions, systems {', '.join(result.info['systems'])}")
    print(result.table)
    print("\n".join(closing_lines(result)))  # last: the judge guard's warning, when it fired
    return 0


def _answers_words(args: argparse.Namespace) -> None:
    from fixgraph.answer.commands import add_preset

    add_preset(args)  # `answers` composes experiment=answers by default
    question_flag_words(args)


def _split_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--refreeze", metavar="REASON", help="rewrite a frozen split (the reason is recorded)")


def _split(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.evaluation.splitting import freeze

    s = cfg.splitting
    split, status = freeze(Path(str(s.pool)), Path(str(s.file)), float(s.test_fraction), str(s.salt), args.refreeze)
    counts = split.counts()
    print(f"{s.file}: {status}; digest {split.digest[:16]}")
    for part in ("dev", "test"):
        total = sum(counts[part].values())
        print(f"  {part}: {total} questions ({', '.join(f'{t} {n}' for t, n in counts[part].items())})")
    return 0


def _sweep_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--study", help="Optuna study name (default: the sweep option's name); resumable")
    parser.add_argument("--trials", type=int, help="total completed trials wanted (default: sweep.n_trials)")
    parser.add_argument("--sampler", choices=("tpe", "grid", "random"), help="default: sweep.sampler")
    parser.add_argument("--storage", help="Optuna storage URL (sqlite:///..., postgresql://...)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes on this machine")
    parser.add_argument("--join", action="store_true", help="join an existing study as one more worker")


def _sweep_words(args: argparse.Namespace) -> None:
    """Sweep expressions (`retriever=choice(a,b)`) form the space; the rest compose the base config."""
    from fixgraph.experiment.sweep_spec import split_sweep_overrides

    args.overrides, args.sweep_params = split_sweep_overrides(args.overrides)


def _sweep(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.config import ConfigError
    from fixgraph.experiment.sweep import run_sweep

    if args.params is not None:
        raise ConfigError("fixgraph sweep composes every trial from conf/: give Hydra overrides, not --params")
    summary = run_sweep(
        cfg,
        overrides=args.overrides,
        sweep_params=args.sweep_params,
        study=args.study,
        trials=args.trials,
        sampler=args.sampler,
        storage=args.storage,
        workers=args.workers,
        join=args.join,
    )
    print(summary.describe())
    return 0


def _finalists_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--study", required=True, help="study name: experiments/<study>/")
    parser.add_argument("--finalists", help="comma-separated system names (of `systems`)")
    parser.add_argument("--from-sweep", metavar="SWEEP", help="take the finalists from this sweep study's best trials")
    parser.add_argument("--top", type=int, default=3, help="with --from-sweep: how many of its best trials")
    parser.add_argument("--storage", help="with --from-sweep: the sweep's Optuna storage URL")
    parser.add_argument("--baseline", help="default: experiment.baseline")
    parser.add_argument("--family-metrics", help="comma-separated; default: comparison.family_metrics")
    parser.add_argument(
        "--exploratory", help="comma-separated systems scored alongside, outside the Holm family (no claim)"
    )
    parser.add_argument("--replace", action="store_true", help="choose again (only before any test run)")
    parser.add_argument("--no-track", action="store_true")


def _finalists(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.experiment.locked import record_finalists
    from fixgraph.experiment.studies import sweep_finalists

    if bool(args.finalists) == bool(args.from_sweep):
        raise ValueError("finalists: give either --finalists a,b or --from-sweep SWEEP (with --top N)")
    extra: dict[str, Any] = {}
    names = csv(args.finalists)
    if args.from_sweep:
        extra = sweep_finalists(cfg, args.from_sweep, args.top, args.storage)
        names = list(extra)
    path, _ = record_finalists(
        cfg,
        args.study,
        names,
        args.baseline,
        csv(args.family_metrics) or None,
        args.replace,
        track=False if args.no_track else None,
        extra_systems=extra,
        exploratory=csv(args.exploratory),
    )
    print((path.parent / "dev_evidence.md").read_text())
    print(f"recorded {path}; score the test split once with `fixgraph test --study {args.study}`")
    return 0


def _test_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--study", required=True)
    parser.add_argument("--force-reason", help="required for any test run after the first; recorded")
    parser.add_argument("--no-track", action="store_true")


def _test(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.experiment.locked import run_test

    report, result = run_test(cfg, args.study, args.force_reason, track=False if args.no_track else None)
    print(report.read_text())
    print(f"report: {report} (+ .json); evaluation: {result.output_dir}")
    return 0


def _compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tag", action="append", default=[], help="select system runs by tag (repeatable)")
    parser.add_argument("--baseline", help="baseline system label (default: the first)")
    parser.add_argument("--metrics", help="comma-separated (default: the headline metrics)")
    parser.add_argument("--axis", help="the axis under test: corpus, chunks, retriever, reranker")
    parser.add_argument("--output", type=Path, help="folder for the table and plots (default: a temp folder)")
    parser.add_argument("--no-track", action="store_true")


def _compare_words(args: argparse.Namespace) -> None:
    """Positional words without '=' are MLflow run ids (evaluation or system runs)."""
    args.runs = [r for r in args.overrides if "=" not in r]
    args.overrides = [o for o in args.overrides if "=" in o]


def _compare(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.experiment.compare_runs import compare_runs

    outcome = compare_runs(
        cfg,
        args.runs,
        args.tag,
        baseline=args.baseline,
        metrics=csv(args.metrics) or None,
        axis=args.axis,
        output=args.output,
        track=not args.no_track,
    )
    print(outcome)
    return 0


def _expected_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("check", "record"))
    parser.add_argument("files", nargs="+", type=Path)


def _expected(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.experiment import expected

    failed = 0
    for path in args.files:
        if args.action == "record":
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


def _fit_ltr_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--parts", required=True, help="dev parts to fit on: split:corpus,... (dev:gnome_help,gen.jsonl:gnome_help)"
    )
    parser.add_argument("--system", default="ltr", help="the ltr system whose weights are fitted (default: ltr)")
    parser.add_argument(
        "--hold-out", choices=("corpus", "part", "none"), default="corpus", help="what each held-out fit leaves out"
    )
    parser.add_argument("--C", type=float, default=0.01, dest="c", help="inverse L2 strength (default 0.01)")
    parser.add_argument("--no-balance", action="store_true", help="every question weighs the same (default: bridge "
                        "and other questions weigh half each)")  # fmt: skip
    parser.add_argument(
        "--write", metavar="NAME", help="write the weights as conf/retriever/NAME.yaml (inherits --system)"
    )
    parser.add_argument("--no-track", action="store_true", help="do not record the fit in MLflow")


def _fit_ltr(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.evaluation.parts import parse_parts, part_config
    from fixgraph.experiment import ltr_fit

    parts = parse_parts(args.parts)
    target = ltr_fit.check_arguments(args.system, args.write, args.overrides)  # before the slow signal pass
    configs = [(part, part_config(part, args.system, args.overrides)) for part in parts]
    fit = ltr_fit.fit_ltr(configs, args.system, args.hold_out, args.c, not args.no_balance)
    name = args.write or f"{args.system}_fitted"
    provenance = fit.provenance(args.system, args.hold_out, args.c, not args.no_balance)
    text = ltr_fit.fitted_config(args.system, name, fit.weights, provenance)
    if fit.table is not None:
        print(f"recall@8 held out by {args.hold_out} (first stage: {args.system}'s candidates in its own order)\n")
        print(fit.table.round(3).to_string(), "\n")
    first = configs[0][1]
    folder = Path(str(first.paths.artifacts)) / "ltr_fit" / name
    ltr_fit.write_outputs(fit, folder, text)
    print(text)
    if target is not None:
        target.write_text(text)
        print(f"wrote {target}: evaluate it with +retriever@systems.{name}={name}")
    print(f"outputs: {folder}")
    if not args.no_track and bool(first.tracking.enabled):
        params = {"name": name, "system": args.system, "parts": args.parts, "hold_out": args.hold_out, "C": args.c,
                  "balance": not args.no_balance, "questions": fit.rows["qid"].nunique()}  # fmt: skip
        print(f"MLflow run {ltr_fit.track(first, fit, params, folder)} (browse with `fixgraph ui`)")
    return 0


def _ui_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument("--backend-store-uri", default="sqlite:///mlflow.db")


def _ui(args: argparse.Namespace, cfg: Any) -> int:
    command = ["mlflow", "ui", "--backend-store-uri", args.backend_store_uri, "--host", "127.0.0.1"]
    return subprocess.call([*command, "--port", str(args.port)])


COMMANDS = [
    Command(
        "run",
        "the main job: fetch, ingest, chunk, index and evaluate, then print the table",
        _evaluate,
        _evaluation_arguments,
        take_words=question_flag_words,
    ),
    Command(
        "evaluate",
        "score the configured systems on a question file",
        _evaluate,
        _evaluation_arguments,
        take_words=question_flag_words,
    ),
    Command(
        "answers",
        "answer, verify and judge the split's questions (answer=, judge=, llm=)",
        _answers,
        _answers_arguments,
        take_words=_answers_words,
    ),
    Command(
        "split", "freeze the dev/test split of the question pool, or verify the frozen one", _split, _split_arguments
    ),
    Command(
        "sweep",
        "Optuna sweep over any config axis (conf/sweep/*.yaml or sweep expressions) on dev",
        _sweep,
        _sweep_arguments,
        take_words=_sweep_words,
    ),
    Command(
        "fit-ltr",
        "fit an ltr system's weights on dev parts of one or more corpora, report them held out, write a config",
        _fit_ltr,
        _fit_ltr_arguments,
        config=False,
    ),
    Command(
        "finalists",
        "score finalists and baseline on dev and record them for the locked test",
        _finalists,
        _finalists_arguments,
    ),
    Command("test", "score the recorded finalists once on the locked test split", _test, _test_arguments),
    Command(
        "compare",
        "paired comparison of MLflow runs: RUN_ID... and/or --tag key=value",
        _compare,
        _compare_arguments,
        take_words=_compare_words,
    ),
    Command(
        "expected",
        "check (or record) expected-score files",
        _expected,
        _expected_arguments,
        config=False,
        overrides=False,
    ),
    Command("ui", "open the MLflow UI on 127.0.0.1", _ui, _ui_arguments, config=False, overrides=False),
]
