"""The two question-set flags every scoring verb takes, as Hydra overrides (so `--params` runs honour them).

A verb declares them with `arguments=` (add_question_flags) and turns them into overrides before its
config is composed with `take_words=question_flag_words` (fixgraph/commands.py)."""

from __future__ import annotations

import argparse


def add_question_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--exclude-locked",
        action="store_true",
        help="drop locked test questions from the question set (refused otherwise); the count is recorded",
    )
    parser.add_argument(
        "--allow-unmapped",
        action="store_true",
        help="score even when some answerable questions have no gold quote that maps (they are listed)",
    )


def question_flag_overrides(args: argparse.Namespace) -> list[str]:
    """`split.exclude_locked=true` / `evaluation.allow_unmapped=true` for the flags given."""
    overrides = []
    if getattr(args, "exclude_locked", False):
        overrides.append("split.exclude_locked=true")
    if getattr(args, "allow_unmapped", False):
        overrides.append("evaluation.allow_unmapped=true")
    return overrides


def question_flag_words(args: argparse.Namespace) -> None:
    """Command.take_words hook: append the flags' overrides to the verb's Hydra overrides."""
    args.overrides = [*args.overrides, *question_flag_overrides(args)]
