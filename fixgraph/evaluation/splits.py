"""The `split` registry: which questions a run is scored on.

Every way questions enter a run goes through here (`resolve_questions` for evaluate / run / answers,
`Split.load()` for sweeps, the candidate cache and benchmarks), and every way checks the question set
against the locked test questions (locked_questions.py) before any work starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from fixgraph.evaluation.locked_questions import LockedMatch, LockedSet, exclusion_record, guard
from fixgraph.evaluation.protocol_errors import LockedSplitError, SplitError
from fixgraph.evaluation.questions import Question, load_questions
from fixgraph.evaluation.splitting import PARTS, question_hash, read_split_file, test_split_unlocked, verify
from fixgraph.io import sha256_file, stable_hash
from fixgraph.registry import Registry


class Split(Protocol):
    name: str
    questions_path: Path
    excluded: list[LockedMatch]  # locked test questions dropped by the last load (exclude_locked)

    @property
    def paths(self) -> tuple[Path, ...]: ...  # every question file it reads

    @property
    def guarded_by(self) -> tuple[Path, ...]: ...  # the frozen splits whose test parts the last load guarded

    def load(self) -> list[Question]: ...


SPLITS: Registry[Split] = Registry("split")


class OneFileSplit:
    """A split that reads one question file and guards it against one frozen split's test part;
    subclasses choose the questions (`select`)."""

    def __init__(self, name: str, questions: str, exclude_locked: bool) -> None:
        self.name = name
        self.questions_path = Path(questions)
        self.exclude_locked = exclude_locked
        self.excluded: list[LockedMatch] = []
        self.locked: LockedSet | None = None

    def select(self, questions: list[Question]) -> list[Question]:
        raise NotImplementedError

    def _guard(self, questions: list[Question], split_file: Path) -> list[Question]:
        self.locked = LockedSet.of_split(split_file)
        selected, self.excluded = guard(questions, self.locked, self.exclude_locked, f"split {self.name}")
        return selected

    @property
    def paths(self) -> tuple[Path, ...]:
        return (self.questions_path,)

    @property
    def guarded_by(self) -> tuple[Path, ...]:
        return (self.locked.split_file,) if self.locked is not None else ()

    def load(self) -> list[Question]:
        return self.select(load_questions(self.questions_path))


@SPLITS.register("file")
class FileSplit(OneFileSplit):
    """Every question of one question file, less the locked test questions of the frozen split `lock`."""

    def __init__(self, name: str, questions: str, lock: str, exclude_locked: bool) -> None:
        super().__init__(name, questions, exclude_locked)
        self.lock_file = Path(lock)

    def select(self, questions: list[Question]) -> list[Question]:
        return self._guard(questions, self.lock_file)


@SPLITS.register("frozen")
class FrozenSplit(OneFileSplit):
    """One part (dev or test) of a frozen split of a question pool; verified on every load."""

    def __init__(self, name: str, questions: str, file: str, part: str, exclude_locked: bool) -> None:
        if part not in PARTS:
            raise SplitError(f"split {name}: part must be one of {', '.join(PARTS)}, got {part!r}")
        super().__init__(name, questions, exclude_locked)
        self.file = Path(file)
        self.part = part

    def select(self, questions: list[Question]) -> list[Question]:
        split = read_split_file(self.file)
        verify(split, questions, self.file)
        if self.part == "test" and not test_split_unlocked():
            raise LockedSplitError(
                f"split {self.name}: the test part is locked; record finalists with `fixgraph finalists` "
                "and score it with `fixgraph test`"
            )
        wanted = set(split.ids(self.part))
        # a dev question with a test question's text (a copy under a new id) is locked as well
        return self._guard([q for q in questions if q.qid in wanted], self.file)


@SPLITS.register("union")
class UnionSplit:
    """The dev parts of several frozen splits of one corpus, scored as one question set.

    A sweep tuned on one part of a few dozen questions can fit their noise: the ltr sweep's pick on the 70
    GNOME dev questions lost 8 questions and won none on the other dev parts (docs/results/quality.md).
    Swept on the union, a pick has to hold on all of them. Each part loads and guards its questions as on
    its own; a question of one part that is a locked test question of another part is refused too (or
    dropped, with `exclude_locked`)."""

    def __init__(self, name: str, parts: Mapping[str, Any], exclude_locked: bool = False) -> None:
        if not parts:
            raise SplitError(f"split {name}: `parts` is empty; name the frozen dev splits to pool")
        self.name = name
        self.parts: dict[str, FrozenSplit] = {}
        for key, node in parts.items():
            part = build_split(node)
            if not isinstance(part, FrozenSplit) or part.part != "dev":
                raise SplitError(
                    f"split {name}: part {key!r} is not the dev part of a frozen split (kind frozen, part dev)"
                )
            self.parts[str(key)] = part
        self.questions_path = next(iter(self.parts.values())).questions_path
        self.exclude_locked = exclude_locked
        self.excluded: list[LockedMatch] = []

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(part.questions_path for part in self.parts.values())

    @property
    def guarded_by(self) -> tuple[Path, ...]:
        return tuple(file for part in self.parts.values() for file in part.guarded_by)

    def load(self) -> list[Question]:
        part_of: dict[str, str] = {}
        questions: list[Question] = []
        self.excluded = []
        for key, part in self.parts.items():
            for question in part.load():
                if question.qid in part_of:
                    raise SplitError(
                        f"split {self.name}: question {question.qid} is in part {part_of[question.qid]!r} and in part "
                        f"{key!r}; the parts must not share question ids"
                    )
                part_of[question.qid] = key
                questions.append(question)
            self.excluded += part.excluded
        for key, part in self.parts.items():  # each part's locked test questions, in the other parts
            others = [q for q in questions if part_of[q.qid] != key]
            _, dropped = guard(others, part.locked, self.exclude_locked, f"split {self.name}, parts other than {key!r}")
            gone = {m.qid for m in dropped}
            questions = [q for q in questions if q.qid not in gone]
            self.excluded += dropped
        return questions


def build_split(cfg: Any) -> Split:
    from fixgraph.config import build

    return build(SPLITS, cfg)


@dataclass
class QuestionSet:
    """The questions a run scores, where they came from, and what the locked-test guard dropped."""

    questions: list[Question]
    path: Path
    name: str  # the run's name: its output folder under artifacts/eval/<corpus>/
    excluded: list[LockedMatch] = field(default_factory=list)
    guarded_by: tuple[Path, ...] = ()  # the frozen splits whose test parts were kept out
    paths: tuple[Path, ...] = ()  # every file the questions came from (a union split reads several)

    @property
    def content_hash(self) -> str:
        return question_set_hash(self.questions)

    def provenance(self) -> dict[str, str]:
        """The question file(s) and their hash, as a run records them."""
        files = self.paths or (self.path,)
        if len(files) == 1:
            return {"questions_file": str(files[0]), "questions_hash": sha256_file(files[0])}
        return {
            "questions_file": " + ".join(map(str, files)),
            "questions_hash": stable_hash([sha256_file(f) for f in files]),
        }

    def exclusion(self) -> dict[str, Any]:
        return exclusion_record(self.excluded, self.guarded_by)


def question_set_hash(questions: list[Question]) -> str:
    """Hash of the questions' full content, independent of file order."""
    return stable_hash(sorted(question_hash(q) for q in questions))


def output_name(stem: str, questions: list[Question], frozen_dev: bool) -> str:
    """`dev` for the frozen dev split (dvc.yaml and the README point there); any other question set is
    `<stem>-<8 hex of its content>`, so two sets with one stem never share (and overwrite) a folder."""
    if frozen_dev:
        return stem
    return f"{stem}-{question_set_hash(questions)[:8]}"


def resolve_questions(cfg: Any, questions_path: Path | None, name: str | None) -> QuestionSet:
    """Questions come from `--questions FILE` (any file in the shared format) or the configured split;
    either way locked test questions are refused or, with `split.exclude_locked`, dropped."""
    exclude = bool(cfg.split.get("exclude_locked", False))  # .get: configs recorded before the key existed
    if questions_path is not None:
        locked = LockedSet.of_split(Path(str(cfg.splitting.file)))
        questions, excluded = guard(load_questions(questions_path), locked, exclude, str(questions_path))
        stem = questions_path.stem
        guarded_by = (locked.split_file,) if locked is not None else ()
        return QuestionSet(questions, questions_path, name or output_name(stem, questions, False), excluded, guarded_by)
    split = build_split(cfg.split)
    questions = split.load()
    frozen_dev = isinstance(split, FrozenSplit) and split.part == "dev"
    default = output_name(split.name, questions, frozen_dev)
    return QuestionSet(questions, split.questions_path, name or default, split.excluded, split.guarded_by, split.paths)
