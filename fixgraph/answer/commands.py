"""Verbs of the answering layer: answers-compare, label, agreement, questions (generate / check / review).

`answers` runs through the experiment layer (experiment/commands.py), which can hand it a study's
finalist; the helpers it shares with this layer (the default preset, the closing lines with the judge
guard's warning) live here.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fixgraph.commands import Command


def add_preset(args: argparse.Namespace) -> None:
    """`fixgraph answers` composes the answers preset (1.5B answerer, closed book vs dense and hybrid)
    unless the command line picks another experiment or a params file fixes the whole config."""
    if getattr(args, "params", None) is not None:
        return
    overrides = list(args.overrides or [])
    if not any(o.lstrip("+~").startswith("experiment=") for o in overrides):
        args.overrides = ["experiment=answers", *overrides]


def closing_lines(result: Any) -> list[str]:
    """Where the outputs are, and last, a warning when the judge's grades are not evidence."""
    lines = [f"outputs: {result.output_dir}"]
    if result.mlflow_run_id:
        lines.append(f"MLflow run {result.mlflow_run_id}")
    judge = result.info["judge"]
    if not judge["guard"]["informative"]:
        lines.append(f"WARNING: judge {judge['name']} is uninformative: {'; '.join(judge['guard']['flags'])}")
    return lines


def _compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=Path, nargs="+", required=True, help="answers run folders (outputs: ...)")
    parser.add_argument("--system", help="the system to compare across runs (default: every shared one)")
    parser.add_argument("--baseline", help="label of the baseline run (default: the first)")


def _compare(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.answer.compare import compare_runs

    print(compare_runs(cfg, args.runs, args.system, args.baseline)[0])
    return 0


def _label_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--answers", type=Path, required=True, help="answers file (answers.jsonl of a run)")
    parser.add_argument("--labels", type=Path, required=True, help="label file (JSON lines, appended)")
    parser.add_argument("--questions", type=Path, help="question file (default: the configured split)")
    parser.add_argument("--limit", type=int, help="stop after this many new labels")
    parser.add_argument(
        "--add", type=Path, nargs="+", help="first append these runs' answered records to --answers (a graded set)"
    )


def _label(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.answer.labelling import add_answers, label_session
    from fixgraph.evaluation.splits import resolve_questions

    if args.add:
        print(f"{add_answers(args.answers, args.add)} answers added to {args.answers}")
    questions = resolve_questions(cfg, args.questions, None).questions
    written = label_session(args.answers, questions, args.labels, seed=int(cfg.seed), limit=args.limit)
    print(f"{written} labels written to {args.labels}")
    return 0


def _agreement_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--answers", type=Path, help="answers file (default: the graded set, answer.graded)")
    parser.add_argument("--labels", type=Path, help="label file {item, correctness} (default: the graded set's)")
    parser.add_argument("--questions", type=Path, help="question file of the answers (default: graded set's / split)")
    parser.add_argument("--recorded", action="store_true", help="use the judge grades stored in the answers file")
    parser.add_argument("--claims", type=Path, help="instead: the verifier vs hand-checked claims (JSON lines)")
    parser.add_argument("--alpha", type=float, default=0.05)


def _agreement(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.answer.measure import agreement_command

    print(json.dumps(agreement_command(cfg, args), indent=2))
    return 0


def _questions_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("generate", "check", "review"))
    parser.add_argument("--out", type=Path, required=True, help="question file (JSON lines)")
    parser.add_argument("--limit", type=int, default=10, help="generate: questions of each kind")
    parser.add_argument("--kinds", default="path,bridge", help="generate: path,bridge")


def _questions(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.answer import questiongen

    return questiongen.command(cfg, args.action, args.out, args.limit, args.kinds.split(","))


COMMANDS = [
    Command(
        "answers-compare",
        "paired comparison of answers runs on the same questions (e.g. two llm=)",
        _compare,
        _compare_arguments,
    ),
    Command("label", "label answers blind (system hidden), resumable; writes a label file", _label, _label_arguments),
    Command(
        "agreement",
        "judge vs people: kappa (CI), weighted kappa, confusion, fact agreement, PPI mean",
        _agreement,
        _agreement_arguments,
    ),
    Command(
        "questions",
        "generate questions from the graph / links, check and review them",
        _questions,
        _questions_arguments,
    ),
]
