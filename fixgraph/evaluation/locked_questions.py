"""The locked test follows the questions, not the split's name.

Any question set an evaluation, sweep, candidate cache or answer run is about to score is checked
against the test part of the frozen split: a question is locked when its qid is a test qid, or when the
hash of its normalised text equals a test question's (so a copy under another id or in another file is
caught too). A set holding locked questions is refused, naming how many and which, unless the caller
asked to exclude them (`--exclude-locked`, config `split.exclude_locked`): then they are dropped, and
the count and ids are logged and recorded with the run. Only the locked-test command (inside
`splitting.unlocked_test_split`) scores them.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fixgraph.evaluation.protocol_errors import LockedSplitError
from fixgraph.evaluation.questions import Question, QuestionFileError, load_questions
from fixgraph.evaluation.splitting import read_split_file, test_split_unlocked
from fixgraph.io import sha256_text

log = logging.getLogger(__name__)
NON_WORD = re.compile(r"[\W_]+")


class LockedQuestionsError(LockedSplitError):
    """A question set that contains locked test questions, outside the locked-test protocol."""


def normalised_text(text: str) -> str:
    """Case, accents-as-composed, punctuation and spacing do not make a question new."""
    return NON_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def text_hash(question: Question) -> str | None:
    """None for a text with no words ("?"): such a text cannot identify a question."""
    text = normalised_text(question.question)
    return sha256_text(text)[:16] if text else None


@dataclass(frozen=True)
class LockedMatch:
    qid: str  # the question in the set being checked
    locked_qid: str  # the test question it is (or copies)
    by: str  # "qid" | "text"
    split_file: Path  # the frozen split whose test part holds locked_qid (a union split guards several)

    def describe(self) -> str:
        return self.qid if self.by == "qid" else f"{self.qid} (same text as {self.locked_qid})"


@dataclass(frozen=True)
class LockedSet:
    """The test questions of one frozen split: their ids and the hashes of their normalised text."""

    split_file: Path
    qids: frozenset[str]
    texts: dict[str, str]  # text hash -> test qid

    @classmethod
    def of_split(cls, split_file: Path) -> LockedSet | None:
        """None when no split has been frozen yet (nothing is locked)."""
        if not split_file.exists():
            return None
        split = read_split_file(split_file)
        test = frozenset(split.ids("test"))
        texts: dict[str, str] = {}
        try:
            pool = load_questions(Path(split.pool))
        except QuestionFileError:
            pool = []  # the pool is verified wherever it is used; here the ids still lock
        for question in pool:
            if question.qid in test and (key := text_hash(question)) is not None:
                texts[key] = question.qid
        return cls(split_file, test, texts)

    def matches(self, questions: Sequence[Question]) -> list[LockedMatch]:
        found = []
        for question in questions:
            if question.qid in self.qids:
                found.append(LockedMatch(question.qid, question.qid, "qid", self.split_file))
            elif (locked := self.texts.get(text_hash(question) or "")) is not None:
                found.append(LockedMatch(question.qid, locked, "text", self.split_file))
        return found


def guard(
    questions: list[Question], locked: LockedSet | None, exclude: bool, what: str
) -> tuple[list[Question], list[LockedMatch]]:
    """(questions to score, locked ones dropped); raises when locked ones are present and not excluded."""
    if locked is None or test_split_unlocked():
        return questions, []
    found = locked.matches(questions)
    if not found:
        return questions, []
    names = ", ".join(m.describe() for m in found)  # every one: the user has to know which to remove
    if not exclude:
        raise LockedQuestionsError(
            f"{what}: {len(found)} of {len(questions)} questions are locked test questions of {locked.split_file} "
            f"({names}); only `fixgraph test` scores them. Use split=dev, or pass --exclude-locked "
            "(split.exclude_locked=true) to drop them (the count is recorded)"
        )
    log.warning("%s: excluded %d locked test question(s) (--exclude-locked): %s", what, len(found), names)
    dropped = {m.qid for m in found}
    return [q for q in questions if q.qid not in dropped], found


def exclusion_record(found: Sequence[LockedMatch], guarded_by: Sequence[Path]) -> dict[str, Any]:
    """What a run records about the locked questions it dropped: every split file whose test part it was
    guarded against (several for a union split) and, per dropped question, the one that locks it."""
    return {
        "count": len(found),
        "split_file": " + ".join(map(str, guarded_by)),
        "questions": [
            {"qid": m.qid, "locked_qid": m.locked_qid, "by": m.by, "split_file": str(m.split_file)} for m in found
        ],
    }
