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

COMMANDS = ("answers", "label", "agreement", "questions")


def add_commands(sub: Any, command: Callable[..., argparse.ArgumentParser]) -> None:
    from fixgraph.evaluation.cli_flags import add_question_flags

    answers = command("answers", "answer, verify and judge the split's questions (answer=, judge=, llm=)")
    answers.add_argument("--questions", type=Path, help="any question file in the shared format")
    answers.add_argument("--name", help="name of this evaluation (default: split name or file stem)")
    answers.add_argument("--no-track", action="store_true", help="do not record the run in MLflow")
    add_question_flags(answers)

    label = command("label", "label answers blind (system hidden), resumable; writes a label file")
    label.add_argument("--answers", type=Path, required=True, help="answers.jsonl of an answers run")
    label.add_argument("--labels", type=Path, required=True, help="label file (JSON lines, appended)")
    label.add_argument("--questions", type=Path, help="question file (default: the configured split)")
    label.add_argument("--limit", type=int, help="stop after this many new labels")

    agree = command("agreement", "judge vs human labels: kappa, weighted kappa, confusion, PPI mean")
    agree.add_argument("--answers", type=Path, required=True)
    agree.add_argument("--labels", type=Path, required=True)
    agree.add_argument("--alpha", type=float, default=0.05)

    # the action comes before the Hydra overrides, so this parser is built here rather than by `command`
    questions = sub.add_parser("questions", help="generate questions from the graph / links, check and review them")
    questions.add_argument("action", choices=("generate", "check", "review"))
    questions.add_argument("--params", type=Path, help="read the resolved config from this file")
    questions.add_argument("--out", type=Path, required=True, help="question file (JSON lines)")
    questions.add_argument("--limit", type=int, default=10, help="generate: questions of each kind")
    questions.add_argument("--kinds", default="path,bridge", help="generate: path,bridge")
    questions.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. llm=qwen_coder_05b")


def dispatch(args: argparse.Namespace, cfg: DictConfig) -> int:
    if args.command == "answers":
        from fixgraph.answer.run import run_answers

        result = run_answers(cfg, args.questions, args.name, track=False if args.no_track else None)
        print(f"\n{result.name}: {result.info['questions']} questions, systems {', '.join(result.info['systems'])}")
        print(result.table)
        print(f"outputs: {result.output_dir}")
        if result.mlflow_run_id:
            print(f"MLflow run {result.mlflow_run_id}")
        return 0
    if args.command == "label":
        from fixgraph.answer.labelling import label_session
        from fixgraph.evaluation.splits import resolve_questions

        questions = resolve_questions(cfg, args.questions, None).questions
        written = label_session(args.answers, questions, args.labels, seed=int(cfg.seed), limit=args.limit)
        print(f"{written} labels written to {args.labels}")
        return 0
    if args.command == "agreement":
        from fixgraph.answer.labelling import judge_agreement

        print(json.dumps(judge_agreement(args.answers, args.labels, args.alpha), indent=2))
        return 0
    from fixgraph.answer import questiongen

    return questiongen.command(cfg, args.action, args.out, args.limit, args.kinds.split(","))
