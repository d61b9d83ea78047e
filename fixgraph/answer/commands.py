"""CLI verbs of the answering layer: answers, label, agreement, questions (generate / check / review).

Registered by fixgraph/cli.py (two lines there), like experiment/commands.py.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

COMMANDS = ("answers", "answers-compare", "label", "agreement", "questions")


def add_commands(sub: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    answers = command("answers", "answer, verify and judge the split's questions (answer=, judge=, llm=)")
    answers.add_argument("--questions", type=Path, help="any question file in the shared format")
    answers.add_argument("--name", help="name of this evaluation (default: split name or file stem)")
    answers.add_argument("--no-track", action="store_true", help="do not record the run in MLflow")

    compare = command("answers-compare", "paired comparison of answers runs on the same questions (e.g. two llm=)")
    compare.add_argument("--runs", type=Path, nargs="+", required=True, help="answers run folders (outputs: ...)")
    compare.add_argument("--system", help="the system to compare across runs (default: every shared one)")
    compare.add_argument("--baseline", help="label of the baseline run (default: the first)")

    label = command("label", "label answers blind (system hidden), resumable; writes a label file")
    label.add_argument("--answers", type=Path, required=True, help="answers file (answers.jsonl of a run)")
    label.add_argument("--labels", type=Path, required=True, help="label file (JSON lines, appended)")
    label.add_argument("--questions", type=Path, help="question file (default: the configured split)")
    label.add_argument("--limit", type=int, help="stop after this many new labels")
    label.add_argument(
        "--add", type=Path, nargs="+", help="first append these runs' answered records to --answers (a graded set)"
    )

    agree = command("agreement", "judge vs people: kappa (CI), weighted kappa, confusion, fact agreement, PPI mean")
    agree.add_argument("--answers", type=Path, help="answers file (default: the graded set, answer.graded)")
    agree.add_argument("--labels", type=Path, help="label file {item, correctness} (default: the graded set's)")
    agree.add_argument("--questions", type=Path, help="question file of the answers (default: graded set's / split)")
    agree.add_argument("--recorded", action="store_true", help="use the judge grades stored in the answers file")
    agree.add_argument("--claims", type=Path, help="instead: the verifier vs hand-checked claims (JSON lines)")
    agree.add_argument("--alpha", type=float, default=0.05)

    # the action comes before the Hydra overrides, so this parser is built here rather than by `command`
    questions = sub.add_parser("questions", help="generate questions from the graph / links, check and review them")
    questions.add_argument("action", choices=("generate", "check", "review"))
    questions.add_argument("--params", type=Path, help="read the resolved config from this file")
    questions.add_argument("--out", type=Path, required=True, help="question file (JSON lines)")
    questions.add_argument("--limit", type=int, default=10, help="generate: questions of each kind")
    questions.add_argument("--kinds", default="path,bridge", help="generate: path,bridge")
    questions.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. llm=qwen_coder_05b")


def add_preset(args: argparse.Namespace) -> None:
    """`fixgraph answers` composes the answers preset (1.5B answerer, closed book vs dense and hybrid)
    unless the command line picks another experiment or a params file fixes the whole config."""
    overrides = list(getattr(args, "overrides", None) or [])
    if args.command != "answers" or getattr(args, "params", None) is not None:
        return
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


def dispatch(args: argparse.Namespace, cfg: DictConfig) -> int:
    if args.command == "answers":
        from fixgraph.answer.run import run_answers

        result = run_answers(cfg, args.questions, args.name, track=False if args.no_track else None)
        print(f"\n{result.name}: {result.info['questions']} questions, systems {', '.join(result.info['systems'])}")
        print(result.table)
        print("\n".join(closing_lines(result)))
        return 0
    if args.command == "answers-compare":
        from fixgraph.answer.compare import compare_runs

        print(compare_runs(cfg, args.runs, args.system, args.baseline)[0])
        return 0
    if args.command == "label":
        from fixgraph.answer.labelling import add_answers, label_session
        from fixgraph.evaluation.splits import resolve_questions

        if args.add:
            print(f"{add_answers(args.answers, args.add)} answers added to {args.answers}")
        questions, _, _ = resolve_questions(cfg, args.questions, None)
        written = label_session(args.answers, questions, args.labels, seed=int(cfg.seed), limit=args.limit)
        print(f"{written} labels written to {args.labels}")
        return 0
    if args.command == "agreement":
        from fixgraph.answer.measure import agreement_command

        print(json.dumps(agreement_command(cfg, args), indent=2))
        return 0
    from fixgraph.answer import questiongen

    return questiongen.command(cfg, args.action, args.out, args.limit, args.kinds.split(","))
