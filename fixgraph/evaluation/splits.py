"""The `split` registry: which questions a run is scored on."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from fixgraph.evaluation.questions import Question, load_questions
from fixgraph.evaluation.splitting import FrozenSplit
from fixgraph.registry import Registry


class Split(Protocol):
    name: str
    questions_path: Path

    def select(self, questions: list[Question]) -> list[Question]: ...

    def load(self) -> list[Question]: ...


SPLITS: Registry[Split] = Registry("split")


@SPLITS.register("file")
class FileSplit:
    """Every question of one question file."""

    def __init__(self, name: str, questions: str) -> None:
        self.name = name
        self.questions_path = Path(questions)

    def select(self, questions: list[Question]) -> list[Question]:
        return questions

    def load(self) -> list[Question]:
        return self.select(load_questions(self.questions_path))


# frozen dev/test parts of a question pool (splitting.py: assignment rule, split file, verification)
SPLITS.register("frozen")(FrozenSplit)


def build_split(cfg: Any) -> Split:
    from fixgraph.config import build

    return build(SPLITS, cfg)


def resolve_questions(cfg: Any, questions_path: Path | None, name: str | None) -> tuple[list[Question], Path, str]:
    """Questions come from `--questions FILE` (any file in the shared format) or the configured split."""
    if questions_path is not None:
        return load_questions(questions_path), questions_path, name or questions_path.stem
    split = build_split(cfg.split)
    return split.load(), split.questions_path, name or split.name
