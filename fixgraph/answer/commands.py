"""Verbs of the answering layer: label, agreement, questions (generate / check / review); `answers` runs
through the experiment layer (experiment/commands.py), which can hand it a study's finalist."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fixgraph.commands import Command


def _label_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--answers", type=Path, required=True, help="answers.jsonl of an answers run")
    parser.add_argument("--labels", type=Path, required=True, help="label file (JSON lines, appended)")
    parser.add_argument("--questions", type=Path, help="question file (default: the configured split)")
    parser.add_argument("--limit", type=int, help="stop after this many new labels")


def _label(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.answer.labelling import label_session
    from fixgraph.evaluation.splits import resolve_questions

    questions = resolve_questions(cfg, args.questions, None).questions
    written = label_session(args.answers, questions, args.labels, seed=int(cfg.seed), limit=args.limit)
    print(f"{written} labels written to {args.labels}")
    return 0


def _agreement_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--answers", type=Path, required=True)
    parser.add_argument("--labels", type=Path, required=True)
    parser.add_argument("--alpha", type=float, default=0.05)


def _agreement(args: argparse.Namespace, cfg: Any) -> int:
    from fixgraph.answer.labelling import judge_agreement

    print(json.dumps(judge_agreement(args.answers, args.labels, args.alpha), indent=2))
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
    Command("label", "label answers blind (system hidden), resumable; writes a label file", _label, _label_arguments),
    Command(
        "agreement",
        "judge vs human labels: kappa, weighted kappa, confusion, PPI mean",
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
